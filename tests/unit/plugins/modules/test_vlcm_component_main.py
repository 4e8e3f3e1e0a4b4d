"""vlcm_component through main(): the arguments parsed by AnsibleModule, the vLCM API (VlcmApi, cluster_hosts)
replaced by a fake image-managed cluster that keeps its desired image, its depots and each host's version. Check
mode predicts the real run, a rerun is idempotent, bad input is refused before any call, a failed remediation
says what it left."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereTaskError
from ansible_collections.gpupool.vcf.plugins.modules import vlcm_component
from tests.lib.module_main import VSPHERE, run_main

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
HOSTS = {"host-1": "esx-01", "host-2": "esx-02"}
WRITES = ("import_depot", "remove_depot", "set_component", "remediate")


class FakeCluster:
    """VlcmApi of cluster img: the desired image's component version, the depots (what each offers) and the
    version each host runs; kept across runs as vCenter keeps them."""

    image = OLD
    depots_now = {}
    offer = [NEW]
    hosts = {}
    fail = None
    calls = []

    def __init__(self, rest, moid, timeout=7200):
        assert rest == "rest session" and moid == "domain-c1"

    def _call(self, *call):
        FakeCluster.calls.append(call)
        if call[0] == FakeCluster.fail:
            raise VsphereTaskError("%s failed: host esx-02 cannot enter maintenance mode (busy)" % call[0])

    def image_managed(self):
        return True

    def component_version(self, component):
        return FakeCluster.image

    def depots(self, component):
        return dict(FakeCluster.depots_now), dict((d, list(FakeCluster.offer)) for d in FakeCluster.depots_now)

    def compliance(self, host_names, component):
        return dict((host_names[h], dict(status="COMPLIANT" if v == FakeCluster.image else "NON_COMPLIANT",
                                         current_version=v, desired_version=FakeCluster.image))
                    for h, v in FakeCluster.hosts.items())

    def import_depot(self, location):
        self._call("import_depot", location)
        FakeCluster.depots_now["depot-1"] = {"location": location}

    def remove_depot(self, depot_id):
        self._call("remove_depot", depot_id)
        del FakeCluster.depots_now[depot_id]

    def set_component(self, component, version):
        self._call("set_component", component, version)
        FakeCluster.image = version

    def remediate(self, hosts=None):
        self._call("remediate", hosts)
        for moid in hosts or list(FakeCluster.hosts):
            FakeCluster.hosts[moid] = FakeCluster.image


def fake_cluster_hosts(client, name):
    assert client == "soap session"
    return ("domain-c1", dict(HOSTS), ["img"]) if name == "img" else (None, {}, ["img"])


@pytest.fixture
def cluster(monkeypatch):
    cls = FakeCluster
    cls.image, cls.depots_now, cls.offer, cls.fail, cls.calls = OLD, {}, [NEW], None, []
    cls.hosts = dict.fromkeys(HOSTS, OLD)
    monkeypatch.setattr(vlcm_component, "VlcmApi", cls)
    monkeypatch.setattr(vlcm_component, "cluster_hosts", fake_cluster_hosts)
    return cls


def run(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, cluster="img", version="550.90.05")
    args.update(params)
    return run_main(vlcm_component, args, check_mode=check_mode, diff=diff)


def writes(cluster):
    return [c[0] for c in cluster.calls if c[0] in WRITES]


def test_check_mode_predicts_import_set_and_remediation_and_the_rerun_changes_nothing(cluster):
    check = run(check_mode=True, diff=True, depot_url=DEPOT, remediate=True)
    assert writes(cluster) == [] and cluster.image == OLD
    assert check["changed"] is True and check["desired_after"] == NEW and check["remediated"] is True
    assert check["diff"] == dict(before=dict(component="NVD-AIE-800", version=OLD),
                                 after=dict(component="NVD-AIE-800", version=NEW))
    real = run(diff=True, depot_url=DEPOT, remediate=True)
    # the depot's id is known once it is imported; everything else is what check mode said
    assert check["depot"] is None and real["depot"] == "depot-1"
    assert dict(real, depot=None) == check
    assert writes(cluster) == ["import_depot", "set_component", "remediate"]
    assert cluster.image == NEW and set(cluster.hosts.values()) == {NEW}
    assert real["compliance"]["esx-02"] == dict(status="COMPLIANT", current_version=NEW, desired_version=NEW)
    cluster.calls = []
    again = run(diff=True, depot_url=DEPOT, remediate=True)
    assert again["changed"] is False and writes(cluster) == [] and again["depot"] == "depot-1"
    assert again["diff"]["before"] == again["diff"]["after"]


def test_remediation_of_named_hosts_only(cluster):
    run(depot_url=DEPOT)
    cluster.calls = []
    check = run(check_mode=True, remediate=True, hosts=["esx-02"])
    real = run(remediate=True, hosts=["esx-02"])
    assert real == check and real["compliance"]["esx-01"]["status"] == "NON_COMPLIANT"
    assert cluster.calls == [("remediate", ["host-2"])] and cluster.hosts == {"host-1": OLD, "host-2": NEW}


def test_bad_input_is_refused_before_any_call(cluster):
    res = run(version="latest")
    assert res["failed"] is True and res["msg"].startswith(
        "Invalid input for vlcm_component: Invalid version for component NVD-AIE-800 (option version)")
    res = run(depot_url=DEPOT.replace("550.90.05", "550.54.10"))
    assert res["failed"] is True and "holds NVIDIA driver 550.54.10" in res["msg"]
    res = run(remediate_timeout="later")
    assert res["failed"] is True and "remediate_timeout" in res["msg"]
    res = run(cluster="ghost")
    assert res["msg"] == "Unable to find cluster ghost: clusters are img. Nothing was changed."
    res = run(hosts=["esx-09"], remediate=True)
    assert res["msg"] == ("Hosts esx-09 are not in cluster img (its hosts: esx-01, esx-02). Nothing was changed.")
    assert cluster.calls == [] and cluster.image == OLD


def test_a_failed_remediation_returns_the_compliance_it_left(cluster):
    cluster.fail = "remediate"
    res = run(depot_url=DEPOT, remediate=True)
    assert res["failed"] is True and "changed" not in res
    assert res["msg"].startswith("Unable to remediate cluster img to NVD-AIE-800 %s: remediate failed: host "
                                 "esx-02 cannot enter maintenance mode" % NEW)
    assert res["desired_before"] == OLD and res["desired_after"] == NEW
    assert res["compliance"]["esx-01"] == dict(status="NON_COMPLIANT", current_version=OLD, desired_version=NEW)
    # the image was set; the rerun only remediates
    cluster.fail, cluster.calls = None, []
    again = run(depot_url=DEPOT, remediate=True)
    assert again["changed"] is True and writes(cluster) == ["remediate"] and set(cluster.hosts.values()) == {NEW}
