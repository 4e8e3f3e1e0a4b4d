"""gpu_capacity through main(): the vCenter inventory (GpuInventory), the guest cluster's reader
(K8sClient, read_pending) and Prometheus (the PromClient that its room's prom_client makes) replaced by fakes; the
design is the example design. An info module: check mode and a rerun give the same report."""
import pathlib

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus import _prom
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import offered_profiles
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import vsphere_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import gpu_capacity
from tests.lib.module_docs import leaked, missing_keys, secret_options
from tests.lib.module_main import VSPHERE, run_main

DESIGN = str(pathlib.Path(__file__).resolve().parents[4] / "examples" / "design.yml")
PROM = "https://prometheus.example.com:9090"
PROM_TOKEN = "prom-token-capacity-2"


def host(name, vms, cards=4):
    return dict(name=name, moid="host-%s" % name[-2:], cluster="gpu-h100", connection_state="connected", maintenance_mode=False,
                gpus=[dict(model="H100-80GB")] * cards, vgpu_profiles=list(offered_profiles("H100-80GB")),
                vgpu_vms=[dict(name=n, power_state="poweredOn", vgpu_profiles=[p]) for n, p in vms])


HOSTS = [host("esx-h100-01", [("inference-1", "nvidia_h100-3-40c"), ("inference-2", "nvidia_h100-3-40c"),
                              ("training-1", "nvidia_h100-80c")]),
         host("esx-h100-02", [("inference-3", "nvidia_h100-3-40c")])]

# no creationTimestamp: the wait would grow between two runs (the report's figures are compared across runs)
PENDING = {"metadata": {"name": "infer-7", "namespace": "team-a"},
           "spec": {"nodeSelector": {"gpupool.vcf/pool": "inference"},
                    "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Pending",
                      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}


class Fakes:
    def __init__(self):
        self.inventory_reads = []
        self.k8s_made = []
        self.prom_made = []
        self.prom_queries = []
        self.fail = {}
        self.vcenter_reads = []
        self.vcenter = None   # {cluster: {profile: figures}} answered as a 9.1 vCenter; None: an 8.0.3 one


@pytest.fixture
def fakes(monkeypatch):
    box = Fakes()

    class Inventory:
        def __init__(self, client):
            self.client = client

        def read(self, cluster=None, gather=None):
            box.inventory_reads.append(dict(client=self.client, cluster=cluster, gather=gather))
            if "inventory" in box.fail:
                raise box.fail["inventory"]
            return [h for h in HOSTS if cluster in (None, h["cluster"])]

    class K8s:
        def __init__(self, params, request_timeout=None):
            box.k8s_made.append(dict(params, request_timeout=request_timeout))

    def read_pending(k8s, group, versions, doing):
        assert isinstance(k8s, K8s) and group == "kueue.x-k8s.io"
        with doing("list", "the Pending pods of the guest cluster"):
            if "pods" in box.fail:
                raise box.fail["pods"]
        return dict(pods=[PENDING], kueue=None)

    class Prom:
        def __init__(self, url, **kwargs):
            box.prom_made.append(dict(kwargs, url=url))

        def query(self, expr, at=None):
            box.prom_queries.append(("query", expr))
            if "prom" in box.fail:
                raise box.fail["prom"]
            return []

        def query_range(self, expr, start, end, step):
            box.prom_queries.append(("query_range", expr))
            return []

    class Vcenter:
        def __init__(self, client):
            self.client = client
            self.calls = 0

        def api_version(self):
            return "8.0.3.0" if box.vcenter is None else "9.1.0.0"

        def read(self, profiles, hosts=None):
            box.vcenter_reads.append(dict(profiles=profiles, hosts=hosts))
            if box.vcenter is None:
                return dict(api_version="8.0.3.0", read=False, reason="not on 8.0.3.0", calls=0, clusters={}, hosts=None)
            if "vcenter" in box.fail:
                self.calls = 1
                raise box.fail["vcenter"]
            return dict(api_version="9.1.0.0", read=True, reason=None, calls=len(box.vcenter),
                        clusters=box.vcenter, hosts=None)

    monkeypatch.setattr(gpu_capacity, "GpuInventory", Inventory)
    monkeypatch.setattr(gpu_capacity, "VcenterCapacity", Vcenter)
    monkeypatch.setattr(gpu_capacity, "K8sClient", K8s)
    monkeypatch.setattr(gpu_capacity, "read_pending", read_pending)
    monkeypatch.setattr(_prom, "PromClient", Prom)  # made by the room's prom_client from the options
    return box


def args(**extra):
    out = dict(VSPHERE, design_file=DESIGN)
    out.update(extra)
    return out


def same_report(a, b):
    """Two reports read at different moments: equal but for the time they were read."""
    strip = ("generated", "markdown")
    return (dict((k, v) for k, v in a.items() if k not in strip) == dict((k, v) for k, v in b.items() if k not in strip)
            and a["markdown"].replace(a["generated"], "") == b["markdown"].replace(b["generated"], ""))


def test_the_capacity_report_has_every_documented_key(fakes):
    result = run_main(gpu_capacity, args())
    assert not result.get("failed"), result.get("msg")
    assert missing_keys(gpu_capacity, result) == []
    assert result["changed"] is False and result["guest"] is None and result["knee"] is None
    c = result["clusters"]["gpu-h100"]
    assert c["gpus"] == 8 and c["gpu_hosts"] == 2
    row = c["profiles"]["nvidia_h100-3-40c"]
    # 3-40c: 2 per H100 card; inference-1 and -2 share one card in MIG mode, inference-3 opens one on host 2,
    # training-1 holds a card whole: 16 slots, 3 used, free 2 x 2 (host 1) + 3 x 2 + 1 (host 2) = 11
    assert (row["total"], row["used"], row["free"]) == (16, 3, 11)
    assert result["spare_ok"] is True and result["spare"]["gpu-h100"]["host_down"] == "esx-h100-01"
    assert fakes.inventory_reads == [dict(client="soap session", cluster=None, gather=["vms"])]


def test_check_mode_and_a_rerun_give_the_same_report(fakes):
    real = run_main(gpu_capacity, args(kubeconfig="/nonexistent/guest.kubeconfig"))
    checked = run_main(gpu_capacity, args(kubeconfig="/nonexistent/guest.kubeconfig"), check_mode=True)
    again = run_main(gpu_capacity, args(kubeconfig="/nonexistent/guest.kubeconfig"))
    assert not real.get("failed"), real.get("msg")
    assert same_report(real, checked) and same_report(real, again)
    assert real["changed"] is checked["changed"] is again["changed"] is False
    [pending] = real["guest"]["pending_pods"]
    assert pending["pool"] == "inference" and pending["pods"] == 1 and pending["gpus"] == {"nvidia.com/gpu": 1}
    assert pending["examples"] == ["team-a/infer-7"] and pending["oldest_wait_s"] is None
    assert real["guest"]["kueue"] is None


def test_diff_mode_gives_no_diff(fakes):
    result = run_main(gpu_capacity, args(), diff=True)
    assert not result.get("failed"), result.get("msg")
    assert "diff" not in result


@pytest.mark.parametrize("bad, message", [
    (dict(profiles=["nvidia_h100-9-99x"]), "profiles: "),
    (dict(cluster=" "), "cluster must not be empty"),
    (dict(prometheus_url=PROM, knee_window="soon"), "knee_window"),
    (dict(kubeconfig=""), "kubeconfig must not be empty"),
])
def test_bad_input_is_refused_before_any_client_call(fakes, bad, message):
    result = run_main(gpu_capacity, args(**bad))
    assert result["failed"] is True and result["msg"].startswith("Invalid input for gpu_capacity: "), result["msg"]
    assert message in result["msg"], result["msg"]
    assert fakes.inventory_reads == [] and fakes.k8s_made == [] and fakes.prom_made == []


def test_design_and_design_file_together_are_refused(fakes):
    result = run_main(gpu_capacity, args(design={"pools": []}))
    assert result["failed"] is True and result["msg"] == "parameters are mutually exclusive: design|design_file"
    assert fakes.inventory_reads == []


def test_a_vcenter_error_names_what_was_read(fakes):
    fakes.fail["inventory"] = VsphereError("the session is not authenticated")
    result = run_main(gpu_capacity, args(cluster="gpu-h100"))
    assert result["failed"] is True
    assert result["msg"] == "Unable to read the GPU capacity of cluster gpu-h100: the session is not authenticated"
    assert fakes.k8s_made == [] and fakes.prom_made == []


def test_a_kubernetes_error_names_the_list_that_failed(fakes):
    fakes.fail["pods"] = K8sError("pods is forbidden", status=403)
    result = run_main(gpu_capacity, args(kubeconfig="/nonexistent/guest.kubeconfig"))
    assert result["failed"] is True
    assert result["msg"] == "Unable to list the Pending pods of the guest cluster: pods is forbidden", result["msg"]
    assert fakes.k8s_made[0]["kubeconfig"] == "/nonexistent/guest.kubeconfig"


def test_a_prometheus_error_names_the_knee_query(fakes):
    fakes.fail["prom"] = PromError("Prometheus answered 503: unavailable", status=503)
    result = run_main(gpu_capacity, args(prometheus_url=PROM, prometheus_token=PROM_TOKEN))
    assert result["failed"] is True
    assert result["msg"].startswith("Unable to query the knee's ") and \
        ("from Prometheus %s: Prometheus answered 503: unavailable" % PROM) in result["msg"], result["msg"]
    assert PROM_TOKEN not in repr(result)


def test_the_knee_is_computed_with_prometheus_and_no_secret_is_in_the_result(fakes):
    spec = dict(vsphere_argument_spec(), **gpu_capacity.ARGUMENT_SPEC)
    assert secret_options(spec) == ["password", "prometheus_token"]
    result = run_main(gpu_capacity, args(prometheus_url=PROM, prometheus_token=PROM_TOKEN))
    assert not result.get("failed"), result.get("msg")
    assert result["knee"] is not None
    assert set(q[0] for q in fakes.prom_queries) == {"query", "query_range"}
    assert fakes.prom_made[0]["bearer_token"] == PROM_TOKEN and fakes.prom_made[0]["url"] == PROM
    made = fakes.prom_made[0]
    assert (made["validate_certs"], made["allow_plain_http"], made["plain_http_option"]) == \
        (True, False, "prometheus_allow_plain_http")
    assert leaked(result, [PROM_TOKEN, VSPHERE["password"]]) == []


def test_vcenter_figures_on_8x_are_not_read_and_say_why(fakes):
    result = run_main(gpu_capacity, args())
    assert not result.get("failed"), result.get("msg")
    assert result["vcenter_capacity"]["read"] is False and result["vcenter_capacity"]["reason"] == "not on 8.0.3.0"
    assert result["findings"] == [] and "Not read: not on 8.0.3.0." in result["markdown"]
    # asked: every profile of the report on its cluster, no host without vcenter_per_host
    [read] = fakes.vcenter_reads
    assert read["hosts"] is None and read["profiles"] == {"gpu-h100": list(result["clusters"]["gpu-h100"]["profiles"])}


def test_vcenter_figures_beside_ours_and_a_finding_per_differing_figure(fakes):
    # ours for 3-40c (the test above): 16 total, 3 used, 11 free; vCenter: 2 reserved, 9 remaining
    fakes.vcenter = {"gpu-h100": {"nvidia_h100-3-40c": dict(max=16, consumed=3, remaining=9, unused_reservation=2)}}
    result = run_main(gpu_capacity, args(vcenter_per_host=True))
    assert not result.get("failed"), result.get("msg")
    row = result["vcenter_capacity"]["clusters"]["gpu-h100"]["nvidia_h100-3-40c"]
    assert row["ours"] == dict(total=16, used=3, free=11) and row["vcenter"]["remaining"] == 9
    assert [(f["cluster"], f["profile"], f["field"], f["ours"], f["vcenter"]) for f in result["findings"]] == [
        ("gpu-h100", "nvidia_h100-3-40c", "free/remaining", 11, 9)]
    assert "- gpu-h100 nvidia_h100-3-40c: our free is 11, vCenter's remaining is 9" in result["markdown"].splitlines()
    assert result["clusters"]["gpu-h100"]["profiles"]["nvidia_h100-3-40c"]["free"] == 11
    # per host: each GPU host with its moid and its cluster's profiles
    hosts = fakes.vcenter_reads[0]["hosts"]
    profiles = list(result["clusters"]["gpu-h100"]["profiles"])
    assert hosts == {"esx-h100-01": ("host-01", profiles), "esx-h100-02": ("host-02", profiles)}


def test_a_fault_of_query_capacity_is_the_reason_not_a_failure(fakes):
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereFault
    fakes.vcenter = {"gpu-h100": {}}
    fakes.fail["vcenter"] = VsphereFault(Exception("InvalidArgument: target"), "DirectPathProfileManagerQueryCapacity")
    result = run_main(gpu_capacity, args())
    assert not result.get("failed"), result.get("msg")
    vc = result["vcenter_capacity"]
    assert vc["read"] is False and vc["reason"].startswith("vCenter answered a fault: DirectPathProfileManagerQueryCapacity")
    assert "InvalidArgument" in vc["reason"] and result["findings"] == []
