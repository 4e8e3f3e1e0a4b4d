"""gpu_pool_audit against the vSphere simulator (examples/fleet.yml) and the Kubernetes rig."""
import copy
import pathlib
import sys

import yaml

from tests.lib.ansible_run import ROOT, run_module, run_playbook
from tests.lib.helpers import rest

_SIM = str(ROOT / "tests" / "sim")
if _SIM not in sys.path:
    sys.path.insert(0, _SIM)

from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance  # noqa: E402,F401 pylint: disable=unused-import

M = "gpupool.vcf.gpu_pool_audit"
DESIGN_FILE = str(ROOT / "examples" / "design.yml")
FULL = "550.90.05-1OEM.800.1.0.20613240"
OLD = "550.54.10-1OEM.800.1.0.20613240"
DRIFT = "550.127.06-1OEM.800.1.0.20613240"
VM_CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"


def rules(result, rule=None):
    return [(f["rule"], f["object"]) for f in result["findings"] if rule is None or f["rule"] == rule]


def audit(args, **kwargs):
    """The module's result (run_module also gives the playbook run)."""
    return run_module(M, args, **kwargs)[0]


def no_k8s(env):
    """The simulator's environment without a guest kubeconfig from the caller's environment."""
    return dict(env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT="")


def test_fleet_driver_drift_is_reported(vsphere, vsphere_env):
    res = audit({"design_file": DESIGN_FILE}, env=no_k8s(vsphere_env))
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["clean"] is False
    assert res["audited"] == ["esxi", "vsphere"]
    assert ("driver_mixed", "cluster gpu-h100") in rules(res)
    mixed = [f for f in res["findings"] if f["rule"] == "driver_mixed"][0]
    assert "esx-h100-04" in mixed["message"] and OLD in mixed["message"] and mixed["severity"] == "error"
    assert rules(res, "driver_off_design") == [("driver_off_design", "host esx-h100-04")]
    # the fleet's GPU VMs have no DRS overrides yet; the Kubernetes links had no connection
    assert ("gpu_vm_not_pinned", "vm llm-training-01") in rules(res)
    assert rules(res, "link_not_audited") == [("link_not_audited", "licensing"), ("link_not_audited", "vks"),
                                              ("link_not_audited", "guest")]
    assert all(f["severity"] == "info" for f in res["findings"] if f["rule"] == "link_not_audited")
    for f in res["findings"]:
        assert set(f) == {"rule", "severity", "link", "object", "message", "fix"} and f["fix"]
    assert res["summary"]["severity"]["info"] == 3
    assert res["summary"]["link"]["esxi"]["error"] == sum(
        1 for f in res["findings"] if f["link"] == "esxi" and f["severity"] == "error")


def test_injected_driver_drift_is_reported(vsphere, vsphere_env):
    vsphere.set_driver("esx-l40s-02", DRIFT)
    try:
        res = audit({"design_file": DESIGN_FILE, "links": ["esxi"]}, env=no_k8s(vsphere_env))
    finally:
        vsphere.set_driver("esx-l40s-02", FULL)
    assert res["audited"] == ["esxi"]
    assert ("driver_mixed", "cluster gpu-l40s") in rules(res)
    assert ("driver_off_design", "host esx-l40s-02") in rules(res)
    assert DRIFT in [f for f in res["findings"] if f["object"] == "host esx-l40s-02"][0]["message"]
    # only the asked link, and no "not audited" findings for links not asked for
    assert {f["link"] for f in res["findings"]} == {"esxi"}

    res = audit({"design_file": DESIGN_FILE, "links": ["esxi"]}, env=no_k8s(vsphere_env))
    assert ("driver_mixed", "cluster gpu-l40s") not in rules(res)


def test_vm_class_profile_changed(vsphere, vsphere_env):
    c = rest(vsphere)
    try:
        c.post(VM_CLASSES, {"id": "gpu-inference", "cpu_count": 8, "memory_MB": 65536, "memory_reservation": 100,
                            "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-1-10c"}]}})
        res = audit({"design_file": DESIGN_FILE, "links": ["vsphere"]}, env=no_k8s(vsphere_env))
    finally:
        c.delete(VM_CLASSES + "/gpu-inference")
        c.close()
    assert rules(res, "vm_class_profile_changed") == [("vm_class_profile_changed", "vm_class gpu-inference")]
    assert ("vm_class_missing", "vm_class gpu-training") in rules(res)
    assert ("namespace_missing", "namespace team-search") in rules(res)


def test_markdown_report_written_rerun_and_check_mode(vsphere, vsphere_env, tmp_path):
    report = tmp_path / "audit.md"
    args = {"design_file": DESIGN_FILE, "report": str(report), "report_format": "markdown", "links": ["esxi"]}

    res = audit(args, env=no_k8s(vsphere_env), check=True)
    assert res["changed"] is True and not report.exists()

    res = audit(args, env=no_k8s(vsphere_env))
    assert res["changed"] is True and res["report"] == str(report)
    text = report.read_text()
    assert text.startswith("# GPU pool audit: lab-gpupool")
    assert "| rule | severity | link | object | message | fix |" in text
    assert "| driver_off_design | error | esxi | host esx-h100-04 |" in text

    res = audit(args, env=no_k8s(vsphere_env))
    assert res["changed"] is False

    vsphere.set_driver("esx-h100-01", DRIFT)
    try:
        res = audit(args, env=no_k8s(vsphere_env), check=True, diff=True)
        assert res["changed"] is True and report.read_text() == text
        assert "esx-h100-01" in res["diff"]["after"] and "esx-h100-01 runs" not in res["diff"]["before"]
    finally:
        vsphere.set_driver("esx-h100-01", FULL)

    html = tmp_path / "audit.html"
    res = audit(dict(args, report=str(html), report_format="html"), env=no_k8s(vsphere_env))
    assert res["changed"] is True and "<td>driver_mixed</td>" in html.read_text()


def test_fail_on_error(vsphere, vsphere_env):
    res = audit({"design_file": DESIGN_FILE, "links": ["esxi"], "fail_on": "error"}, env=no_k8s(vsphere_env))
    assert res["failed"] and "error(s)" in res["msg"]
    assert ("driver_off_design", "host esx-h100-04") in rules(res)


def test_asked_link_without_connection_fails(vsphere_env):
    res = audit({"design_file": DESIGN_FILE, "links": ["guest"]}, env=no_k8s(vsphere_env))
    assert res["failed"] and "kubeconfig" in res["msg"]


def test_playbook(vsphere, vsphere_env, tmp_path):
    report = tmp_path / "gpu-pool-audit.md"
    res = run_playbook(ROOT / "playbooks" / "audit.yml", env=no_k8s(vsphere_env),
                       extra_vars={"audit_report": str(report), "audit_kubeconfig": ""})
    assert res.rc == 0, res.stdout[-3000:]
    audit = res.result("Audit every link against the design")
    assert audit["changed"] is True and report.exists()
    summary = res.result("Show the summary")["msg"]
    assert summary[0].startswith("drift found") and "links audited: esxi, vsphere" in summary[0]
    assert any(line.startswith("error: driver_off_design: host esx-h100-04") for line in summary)

    res = run_playbook(ROOT / "playbooks" / "audit.yml", env=no_k8s(vsphere_env),
                       extra_vars={"audit_report": str(report), "audit_kubeconfig": "", "audit_fail_on": "error"})
    assert res.rc != 0


# --- Kubernetes links on the rig ------------------------------------------------------------------


def k8s_design(namespace):
    design = yaml.safe_load(pathlib.Path(DESIGN_FILE).read_text())
    design = copy.deepcopy(design)
    design["guest"]["operator_namespace"] = namespace
    return design


def test_guest_untainted_gpu_node_and_missing_licensing_secret(k8s_rig, k8s_api, k8s_namespace):
    from kubernetes import client

    core = client.CoreV1Api(k8s_api)
    node = "gpu-h100-0"
    taints = core.read_node(node).spec.taints or []
    kept = [t for t in taints if t.key != "nvidia.com/gpu"]
    assert len(kept) < len(taints), "the rig's GPU node should start with the nvidia.com/gpu taint"
    args = {"design": k8s_design(k8s_namespace), "links": ["guest", "vks"],
            "kubeconfig": str(k8s_rig.kubeconfig), "supervisor_kubeconfig": str(k8s_rig.kubeconfig)}
    core.patch_node(node, {"spec": {"taints": [t.to_dict() for t in kept] or None}})
    try:
        res = audit(args)
    finally:
        core.patch_node(node, {"spec": {"taints": [t.to_dict() for t in taints]}})
    assert not res.get("failed"), res.get("msg")
    assert res["audited"] == ["vks", "guest"]
    assert ("gpu_node_untainted", "node %s" % node) in rules(res)
    assert ("gpu_node_untainted", "node gpu-h100-1") not in rules(res)
    assert ("licensing_secret_missing", "secret %s/licensing-config" % k8s_namespace) in rules(res)
    assert ("guest_namespace_missing", "namespace team-search") in rules(res)
    assert ("priority_class_missing", "priority_class gpu-inference") in rules(res)
    assert ("vks_cluster_missing", "vks_cluster gpu-workloads") in rules(res)
    assert ("node_pool_no_nodes", "node_pool inference") in rules(res)
    # the module reads the DCGM exporter metrics ConfigMap of the operator namespace (none made here)
    assert ("dcgm_metrics_config_missing", "config_map %s/gpupool-dcgm-metrics" % k8s_namespace) in rules(res)

    core.create_namespaced_secret(k8s_namespace, {"metadata": {"name": "licensing-config"},
                                                  "stringData": {"client_configuration_token.tok": "x"}})
    res = audit(args)
    assert not rules(res, "licensing_secret_missing")
    assert not rules(res, "gpu_node_untainted")


def test_hand_pinned_gpu_vms_are_named_until_adopted(vsphere, vsphere_env):
    """Where the design adopts cluster gpu-h100, GPU VMs an administrator pinned by hand (pyvmomi) are as
    designed but not the collection's own: object_not_owned names each; once drs_gpu_pinning adopts them
    (the cluster's gpupool.vcf.drs-pinned record) the audit names none. Without adopt nothing is named."""
    from tests.integration.test_drs_ownership import Vc
    design = yaml.safe_load(pathlib.Path(DESIGN_FILE).read_text())
    adopting = copy.deepcopy(design)
    [h100] = [c for c in adopting["clusters"] if c["name"] == "gpu-h100"]
    h100["adopt"] = True
    args = {"design": adopting, "links": ["esxi"]}
    before = audit(args, env=no_k8s(vsphere_env))
    assert not before.get("failed"), before.get("msg")
    unpinned = sorted(obj.split(" ", 1)[1] for rule, obj in rules(before, "gpu_vm_not_pinned"))
    vc = Vc(vsphere)
    try:
        gpu_h100 = [vm.name for host in vc.cluster("gpu-h100").host for vm in host.vm]
        hand = [name for name in unpinned if name in gpu_h100]
        assert hand, "the example fleet should have unpinned GPU VMs on gpu-h100: %s" % unpinned
        for name in hand:
            vc.set_override("gpu-h100", name, "partiallyAutomated")
        res = audit(args, env=no_k8s(vsphere_env))
        named = sorted(obj for rule, obj in rules(res, "object_not_owned"))
        assert named == sorted("vm %s" % name for name in hand), res["findings"]
        assert not [obj for rule, obj in rules(res, "gpu_vm_not_pinned") if obj.split(" ", 1)[1] in hand]
        assert all(f["link"] == "esxi" and f["severity"] == "info" and "adopt: true" in f["fix"]
                   for f in res["findings"] if f["rule"] == "object_not_owned")
        plain = audit({"design": design, "links": ["esxi"]}, env=no_k8s(vsphere_env))
        assert rules(plain, "object_not_owned") == []  # not adopted: not named
        pinned, _play = run_module("gpupool.vcf.drs_gpu_pinning", {"cluster": "gpu-h100", "adopt": True},
                                   env=vsphere_env)
        assert not pinned.get("failed"), pinned.get("msg")
        assert set(hand) <= set(pinned["owned"])
        after = audit(args, env=no_k8s(vsphere_env))
        assert rules(after, "object_not_owned") == [], after["findings"]
    finally:
        vc.close()
