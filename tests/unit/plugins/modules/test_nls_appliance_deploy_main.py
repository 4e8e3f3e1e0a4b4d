"""nls_appliance_deploy through main(): the arguments parsed by AnsibleModule (the nodes' suboptions, the
choices of the cluster settings), a real appliance image from the DLS double (tests/sim/dls), the vCenter
side (the appliance's cluster, its VMs and their settings) replaced by a fake site. Check mode predicts
the real run, a rerun is idempotent, --diff shows the nodes and cluster settings before and after, bad
input is refused before vCenter is read, a failed import names the node and what was done before it."""
import appliance_ova
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import nls_appliance_deploy
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main

PASSWORD = "vc-pw-never-shown"
PAIR = [dict(name="dls-1", ovf_properties={"appliance.ip0": "10.0.0.11"}),
        dict(name="dls-2", ovf_properties={"appliance.ip0": "10.0.0.12"})]
WRITES = ("deploy", "power_on", "remove", "reconfigure")


class Site:
    """ApplianceSite over plain data: the VMs of the appliance's names and the cluster's settings.
    ``fail`` names a write that raises the client's error; ``calls`` records every read and write."""

    vms = {}
    cluster = {}
    calls = []
    fail = None

    def __init__(self, client, cluster, datastore, network=None, datacenter=None, ssl_context=None):
        assert client == "soap session" and (cluster, datastore) == ("mgmt", "vsan-mgmt")
        self.vm_refs = {}
        self.uploaded = 0

    def _call(self, *call):
        Site.calls.append(call)
        if call[0] == Site.fail:
            raise VsphereError("%s refused: NoPermission" % call[0])

    def read(self, names):
        self._call("read", sorted(names))
        cluster = dict(Site.cluster, rules=dict(Site.cluster["rules"]), das=dict(Site.cluster["das"]),
                       drs=dict(Site.cluster["drs"]))
        return dict(vms=dict((n, dict(v)) for n, v in Site.vms.items() if n in names), cluster=cluster)

    def deploy(self, package, name, properties, role, networks=(), power_on=True, disk_provisioning="thin",
               lease_timeout=1800):
        assert package.descriptor.startswith("<?xml") and networks == [appliance_ova.NETWORK]
        self._call("deploy", name, role)
        self.uploaded += 1024
        Site.vms[name] = dict(moid="vm-%d" % (len(Site.vms) + 10), owner=dict(state="deployed", role=role),
                              power="poweredOn" if power_on else "poweredOff", properties=dict(properties))
        return Site.vms[name]["moid"]

    def power_on(self, name):
        self._call("power_on", name)
        Site.vms[name]["power"] = "poweredOn"

    def remove(self, name):
        self._call("remove", name)
        del Site.vms[name]

    def reconfigure(self, plan, rule_name, restart_priority, drs_behavior):
        self._call("reconfigure", rule_name)
        if plan["rule"]:
            Site.cluster["rules"][rule_name] = dict(key=7, kind="anti-affinity", enabled=True, vms=plan["rule"][2])
        for das in plan["das"]:
            Site.cluster["das"][das[1]] = restart_priority
        for drs in plan["drs"]:
            Site.cluster["drs"][drs[1]] = dict(behavior=drs_behavior, enabled=True)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    return str(appliance_ova.build(tmp_path_factory.mktemp("appliance")))


@pytest.fixture
def site(monkeypatch):
    Site.vms, Site.calls, Site.fail = {}, [], None
    Site.cluster = dict(rules={}, das={}, drs={}, ha_enabled=True, drs_enabled=True, overrides_enabled=True)
    monkeypatch.setattr(nls_appliance_deploy, "ApplianceSite", Site)
    return Site


def run(image, check_mode=False, diff=False, **params):
    args = dict(VSPHERE, password=PASSWORD, ovf=image, nodes=PAIR, cluster="mgmt", datastore="vsan-mgmt")
    args.update(params)
    return run_main(nls_appliance_deploy, args, check_mode=check_mode, diff=diff)


def writes(site):
    return [c for c in site.calls if c[0] in WRITES]


def test_check_mode_predicts_the_import_and_the_rerun_changes_nothing(image, site):
    check = run(image, check_mode=True, diff=True)
    assert writes(site) == [] and site.vms == {}
    real = run(image, diff=True)
    assert writes(site) == [("deploy", "dls-1", "primary"), ("deploy", "dls-2", "secondary"), ("reconfigure", "dls-1-ha-pair")]
    assert real["changed"] is True and real["uploaded_bytes"] == 2048
    assert [(n["name"], n["role"], n["action"]) for n in real["nodes"]] == [("dls-1", "primary", "import"),
                                                                            ("dls-2", "secondary", "import")]
    # the run learns the moids the import made; everything else is as check mode said
    assert [n["moid"] for n in check["nodes"]] == [None, None] and [n["moid"] for n in real["nodes"]] == ["vm-10", "vm-11"]
    same = dict(real, nodes=check["nodes"])
    del same["uploaded_bytes"]
    assert same == check
    assert real["diff"]["before"]["nodes"] == {"dls-1": "absent", "dls-2": "absent"}
    assert real["diff"]["after"]["nodes"] == {"dls-1": "deployed, poweredOn", "dls-2": "deployed, poweredOn"}
    assert real["diff"]["after"]["cluster"]["rule dls-1-ha-pair vms"] == ["dls-1", "dls-2"]
    assert real["ovf"]["name"] == appliance_ova.NAME and real["drift"] == []
    assert ("vm dls-2", "ha_restart_priority") in [(c["object"], c["field"]) for c in real["cluster_changes"]]
    assert missing_keys(real, nls_appliance_deploy, "success", "when a node was imported") == []
    site.calls = []
    again = run(image, diff=True)
    assert again["changed"] is False and writes(site) == [] and again["cluster_changes"] == []
    assert [n["action"] for n in again["nodes"]] == ["keep", "keep"] and again["diff"]["before"] == again["diff"]["after"]
    assert shows([check, real, again], PASSWORD) == []


def test_a_powered_off_node_is_powered_on_and_drift_is_reported_not_redeployed(image, site):
    run(image)
    site.vms["dls-2"]["power"] = "poweredOff"
    site.calls = []
    changed = [dict(PAIR[0], ovf_properties={"appliance.ip0": "10.0.0.21"}), PAIR[1]]
    check = run(image, check_mode=True, diff=True, nodes=changed)
    real = run(image, diff=True, nodes=changed)
    assert real.pop("uploaded_bytes") == 0 and real == check and writes(site) == [("power_on", "dls-2")]
    assert [n["action"] for n in real["nodes"]] == ["keep", "power_on"]
    assert real["drift"] == ["dls-1: OVF property appliance.ip0 is '10.0.0.11', the variables say '10.0.0.21' (a deployed "
                             "appliance keeps its settings: change them in its web interface, or remove the VM to redeploy)"]
    assert real["diff"]["before"]["nodes"]["dls-2"] == "deployed, poweredOff"


def test_bad_input_is_refused_before_vcenter_is_read(image, site, tmp_path):
    res = run(image, restart_priority="urgent")
    assert res["failed"] is True and "value of restart_priority must be one of: " in res["msg"]
    res = run(image, nodes=[dict(ovf_properties={})])
    assert res["failed"] is True and "missing required arguments: name found in nodes" in res["msg"]
    res = run(image, nodes=PAIR + [dict(name="dls-1")], datastore="")
    assert res["failed"] is True and res["msg"].startswith("Invalid input for nls_appliance_deploy: ")
    assert res["invalid_input"] == ["datastore must not be empty", "nodes must list 1 node or 2 (the HA pair), not 3",
                                    "nodes[2].name 'dls-1' is given twice; the nodes need two names"]
    text = tmp_path / "appliance.txt"
    text.write_text("not an image")
    res = run(str(text))
    assert res["msg"] == ("Unable to deploy the DLS appliance dls-1 + dls-2: ovf %s is not an .ova or .ovf file; "
                          "nothing was changed" % text)
    res = run(image, nodes=[dict(name="dls-1", ovf_properties={"appliance.build": "x"})])
    assert res["msg"] == ("Unable to deploy the DLS appliance dls-1: dls-1: OVF property appliance.build is not "
                          "user-configurable in the image; nothing was changed")
    assert res["ovf"]["name"] == appliance_ova.NAME
    assert site.calls == [] and shows(res, PASSWORD) == []
    # a VM of a node's name that the collection did not deploy: refused after the read, before any write
    site.vms["dls-1"] = dict(moid="vm-5", owner={}, power="poweredOn", properties={})
    res = run(image)
    assert "a VM named dls-1 exists that the collection did not deploy" in res["msg"] and writes(site) == []


def test_a_failed_write_names_the_node_and_what_was_done_before(image, site):
    site.fail = "reconfigure"
    res = run(image)
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == ("Unable to reconfigure cluster mgmt for the appliance nodes: reconfigure refused: NoPermission; "
                          "done before the failure: dls-1: imported and powered on; dls-2: imported and powered on; a "
                          "rerun resumes (a node left half-imported is removed and imported again)")
    assert res["done"] == ["dls-1: imported and powered on", "dls-2: imported and powered on"]
    site.vms, site.fail = {}, "deploy"
    res = run(image)
    assert res["msg"].startswith("Unable to import appliance node dls-1 from %s: deploy refused: NoPermission; "
                                 "nothing was changed" % image)
    assert res["importing"] == "dls-1" and shows(res, PASSWORD) == []
