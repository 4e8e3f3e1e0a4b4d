"""gpu_pool_preflight through main() on the runner: the arguments parsed by AnsibleModule, the vSphere client
layer (the SOAP client's retrievals, the privilege reader, the Supervisor and storage policy reader) replaced by
fakes that answer as the example platform would; the judging, the table and the merge are the module's own.
Go and no-go per link, a missing privilege named with its link and objects, a Supervisor that cannot be read,
check mode equal to a run, the merge of per-vCenter results without a vSphere read, and the licensing link through
the DLS and Prometheus clients that the connection options make (their rooms' clients replaced by fakes)."""
import copy

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.dls import _nls
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus import _prom
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _vsphere_module
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, vim
from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_preflight
from tests.lib.module_main import VSPHERE, run_main
from tests.unit.plugins.module_utils.pure.test_preflight import CLUSTERS, ROOT

DESIGN = str(ROOT / "examples" / "design.yml")
POLICY = "vSAN Default Storage Policy"


class Ref:
    def __init__(self, moid):
        self._moId = moid


class Props(dict):
    """What the client's retrieve() yields: the properties, ``moid`` and ``obj``."""

    def __init__(self, moid, **props):
        dict.__init__(self, props)
        self.moid = moid
        self.obj = Ref(moid)


class Platform:
    """The example platform as the fakes answer it; ``lacking`` {object label: privileges not held}."""

    def __init__(self):
        self.lacking = {}
        self.supervisor_error = None
        self.reads = []
        self.hosts = dict(("host-%s" % h, h) for hosts in CLUSTERS.values() for h in hosts)

    def retrieve(self, specs, root=None):
        kind = list(specs)[0]
        self.reads.append(kind.__name__ if hasattr(kind, "__name__") else str(kind))
        if kind is vim.ClusterComputeResource:
            return [Props("domain-%s" % name, name=name, host=[Ref("host-%s" % h) for h in hosts])
                    for name, hosts in CLUSTERS.items()]
        if kind is vim.HostSystem:
            return [Props(moid, name=name) for moid, name in self.hosts.items()]
        if kind is vim.Datastore:
            return [Props("datastore-1", name="LocalDS_0")]
        raise AssertionError("unexpected retrieval of %s" % kind)


@pytest.fixture
def platform(monkeypatch):
    state = Platform()
    client = type("Client", (), {"retrieve": lambda self, specs, root=None: state.retrieve(specs, root)})()

    class Authz:
        def __init__(self, c):
            assert c is client

        def root_folder(self):
            return Ref("group-d1")

        def api_version(self):
            return "8.0.3.0"

        def session_privileges(self, refs, wanted):
            state.reads.append("HasPrivilegeOnEntities")
            return dict((label, dict((p, p not in state.lacking.get(label, ())) for p in privs))
                        for label, privs in wanted.items() if label in refs)

    class Namespaces:
        def __init__(self, rest, soap=None, api_version=None):
            assert rest == "rest session" and soap is not None and api_version is not None

        def supervisors(self):
            if state.supervisor_error:
                raise VsphereError(state.supervisor_error)
            return [dict(cluster="domain-gpu-h100", cluster_name="gpu-h100", config_status="RUNNING",
                         kubernetes_status="READY")]

        def policy_names(self):
            return {"policy-1": POLICY}

    monkeypatch.setattr(_vsphere_module.VsphereModule, "client", lambda self: client)
    monkeypatch.setattr(_vsphere_module.VsphereModule, "rest_client", lambda self: "rest session")
    monkeypatch.setattr(gpu_pool_preflight, "AuthzApi", Authz)
    monkeypatch.setattr(gpu_pool_preflight, "NamespaceApi", Namespaces)
    return state


def run(check_mode=False, connect=True, **params):
    args = dict(VSPHERE, design_file=DESIGN) if connect else dict(design_file=DESIGN)
    args.update(params)
    return run_main(gpu_pool_preflight, args, check_mode=check_mode, sessions=False)


def test_the_example_platform_is_go_and_the_links_without_connection_not_checked(platform):
    res = run()
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["go"] is True
    assert [(k, v["status"]) for k, v in sorted(res["links"].items())] == [
        ("esxi", "go"), ("guest", "not checked"), ("licensing", "not checked"), ("vks", "not checked"), ("vsphere", "go")]
    assert res["missing_privileges"] == [] and res["api_version"] == "8.0.3.0" and res["vcenter"] is None
    assert "HasPrivilegeOnEntities" in platform.reads


def test_a_missing_privilege_is_named_with_its_link_and_objects_and_makes_it_no_go(platform):
    platform.lacking = {"host esx-h100-02": {"Host.Config.Patch"}, "vCenter root folder": {"VirtualMachineClasses.Manage"}}
    res = run()
    assert res["go"] is False and not res.get("failed")
    assert res["links"]["esxi"] == dict(go=False, status="no-go", reasons=[
        "the account lacks privilege Host.Config.Patch on host esx-h100-02 (the NVIDIA host driver (InstallHostPatchV2_Task))"])
    assert res["links"]["vsphere"]["go"] is False
    assert res["missing_privileges"] == [
        dict(link="esxi", privilege="Host.Config.Patch", objects=["host esx-h100-02"],
             what="the NVIDIA host driver (InstallHostPatchV2_Task)"),
        dict(link="vsphere", privilege="VirtualMachineClasses.Manage", objects=["vCenter root folder"],
             what="VM classes with vGPU profiles")]
    assert "<td>esxi</td><td>Host.Config.Patch</td><td>host esx-h100-02</td>" in res["html"]


def test_a_supervisor_listing_that_fails_is_no_go_for_the_vsphere_link_only(platform):
    platform.supervisor_error = "Unable to list the Supervisors: 503"
    res = run()
    assert res["links"]["esxi"]["go"] is True
    assert res["links"]["vsphere"] == dict(go=False, status="no-go", reasons=[
        "the Supervisors could not be read: Unable to list the Supervisors: 503"])


def test_check_mode_gives_the_same_result_as_a_run(platform):
    platform.lacking = {"cluster gpu-l40s": {"Host.Inventory.EditCluster"}}
    real, predicted = run(), run(check_mode=True)
    assert predicted == real and real["go"] is False


def test_results_of_each_vcenter_are_merged_without_a_vsphere_read(platform):
    platform.lacking = {"host esx-l40s-01": {"Host.Config.Settings"}}
    one = run()  # the result of the design's one vCenter, as preflight.yml registers it
    merged = run(connect=False, vcenter_results=[copy.deepcopy(one)])
    assert platform.reads.count("HasPrivilegeOnEntities") == 1  # the merge read no vSphere link
    assert merged["links"]["esxi"] == one["links"]["esxi"] and merged["links"]["vsphere"] == one["links"]["vsphere"]
    with open(DESIGN) as handle:
        vcenter = list(gpu_pool_preflight.derive(yaml.safe_load(handle))["vcenters"])[0]
    assert merged["missing_privileges"] == [dict(m, vcenter=vcenter) for m in one["missing_privileges"]]
    assert merged["api_versions"] == {vcenter: "8.0.3.0"} and merged["go"] is False
    # a vCenter the design does not name is refused before anything is judged
    bad = run(connect=False, vcenter_results=[dict(one, vcenter="elsewhere")])
    assert bad["failed"] and "vCenter 'elsewhere'" in bad["msg"] and "not in the design" in bad["msg"]
    # and none given: the vSphere links are not checked
    none = run(connect=False, vcenter_results=[])
    assert none["links"]["esxi"]["status"] == "not checked" and none["go"] is True


class Dls:
    """The DLS client that the dls room's dls_client makes from the options; ``made`` and ``calls`` record the use."""

    made, calls, error = [], [], None

    def __init__(self, host, port, username, password, validate_certs=True, ca_file=None, timeout=30):
        Dls.made.append(dict(host=host, port=port, username=username, password=password, validate_certs=validate_certs,
                             ca_file=ca_file, timeout=timeout))

    def call(self, method, path):
        Dls.calls.append((method, path))
        if Dls.error is not None:
            raise Dls.error
        return {}


class Prom:
    """The Prometheus client that the prometheus room's prom_client makes from the options."""

    made, error = [], None

    def __init__(self, url, **settings):
        Prom.made.append(dict(settings, url=url))

    def query(self, expr):
        if Prom.error is not None:
            raise Prom.error
        return [dict(metric={}, value=[0, "1"])] if expr == "vector(1)" else []


@pytest.fixture
def licensing(monkeypatch, platform):
    Dls.made, Dls.calls, Dls.error, Prom.made, Prom.error = [], [], None, [], None
    monkeypatch.setattr(_nls, "DlsClient", Dls)
    monkeypatch.setattr(_prom, "PromClient", Prom)
    return platform


LICENSING = dict(dls_host="dls-1.example.com", dls_username="dls_admin", dls_password="dls-s3cret", dls_port=8443,
                 prometheus_url="https://prometheus.example.com", prometheus_bearer_token="prom-t0ken", request_timeout=12)


def test_the_licensing_link_reads_through_the_clients_its_connection_options_make(licensing):
    res = run(**LICENSING)
    assert not res.get("failed"), res.get("msg")
    assert res["links"]["licensing"]["status"] == "go", res["links"]["licensing"]
    assert Dls.made == [dict(host="dls-1.example.com", port=8443, username="dls_admin", password="dls-s3cret",
                             validate_certs=True, ca_file=None, timeout=12)]
    assert Dls.calls == [("GET", gpu_pool_preflight.SERVICE_INSTANCE)]
    prom = Prom.made[0]
    assert (prom["url"], prom["bearer_token"], prom["validate_certs"], prom["timeout"]) == \
        ("https://prometheus.example.com", "prom-t0ken", True, 12)
    assert (prom["allow_plain_http"], prom["plain_http_option"]) == (False, "prometheus_allow_plain_http")
    assert "dls-s3cret" not in repr(res) and "prom-t0ken" not in repr(res)


def test_an_appliance_or_prometheus_that_fails_makes_the_licensing_link_no_go(licensing):
    Dls.error = DlsError("DLS appliance unreachable at dls-1.example.com:8443 (connection refused)", kind="refused")
    Prom.error = PromError("/api/v1/query vector(1): answered 401 Unauthorized", status=401)
    res = run(**LICENSING)
    link = res["links"]["licensing"]
    assert link["go"] is False and res["go"] is False
    text = " ".join(link["reasons"])
    assert "DLS appliance unreachable at dls-1.example.com:8443" in text
    assert "https://prometheus.example.com: /api/v1/query vector(1): answered 401 Unauthorized" in text
