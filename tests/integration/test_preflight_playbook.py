"""playbooks/preflight.yml against the vSphere simulator on the example fleet (the Kubernetes links:
k8s/test_preflight_k8s.py, on the session's Kubernetes rig): go on the example platform,
no-go naming what a design references and the platform lacks, and zero writes in the simulator's request
counts (SOAP methods and REST requests, tests/sim/vsphere admin.go /_sim/stats)."""
import pathlib

import yaml

from tests.lib.ansible_run import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "preflight.yml"

# SOAP methods that change nothing on the platform: reads, the session's own login and logout, and the
# session-scoped ContainerView a PropertyCollector retrieval walks (made and destroyed in the same read)
READS = ("Retrieve", "Fetch", "Continue", "Has", "Query", "Find")
SESSION = {"Login", "Logout", "CreateContainerView", "DestroyView"}
REST_SESSION = {"POST /api/session", "DELETE /api/session"}


def writes(stats):
    soap = [m for m in stats["soap"]["methods"] if not m.startswith(READS) and m not in SESSION]
    rest = [p for p in stats["rest"]["paths"] if not p.startswith("GET ") and p not in REST_SESSION]
    return soap, rest


def preflight(vsphere, tmp_path, design=None, **extra):
    env = dict(vsphere.env, K8S_AUTH_KUBECONFIG="", PROMETHEUS_URL="")
    extra_vars = dict(extra)
    if design is not None:
        path = tmp_path / "design.yml"
        path.write_text(yaml.safe_dump(design))
        extra_vars["preflight_design_file"] = str(path)
    vsphere.reset_stats()
    run = run_playbook(PLAYBOOK, env=env, extra_vars=extra_vars)
    return run, vsphere.stats()


def test_example_platform_is_go_with_zero_writes(vsphere, tmp_path):
    run, stats = preflight(vsphere, tmp_path)
    assert run.rc == 0, run.stdout[-3000:]
    res = run.result("Read every link, change nothing")
    assert res["changed"] is False and res["go"] is True
    assert res["links"]["esxi"]["status"] == "go" and res["links"]["vsphere"]["status"] == "go"
    assert res["links"]["guest"]["status"] == "not checked"
    assert res["missing_privileges"] == []
    assert res["api_version"] and res["api_features"]["vm_class_config_spec"]["supported"] is True
    assert "HasPrivilegeOnEntities" in stats["soap"]["methods"]  # the privileges were asked, not tried
    assert "GET /api/vcenter/storage/policies" in stats["rest"]["paths"]
    assert writes(stats) == ([], [])


def test_missing_cluster_and_storage_policy_are_no_go(vsphere, tmp_path):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    design["supervisor"]["storage_policy"] = "gold-encrypted"
    design["clusters"][1]["name"] = "gpu-a30"
    for pool in design["pools"]:
        if pool.get("cluster") == "gpu-l40s":
            pool["cluster"] = "gpu-a30"
    run, stats = preflight(vsphere, tmp_path, design=design)
    assert run.rc != 0
    res = run.result("Read every link, change nothing")
    assert res["go"] is False
    assert any(r.startswith("cluster gpu-a30 of the design is not in vCenter") for r in res["links"]["esxi"]["reasons"])
    assert "storage policy 'gold-encrypted' of the design's namespaces is not in vCenter" in res["links"]["vsphere"]["reasons"]
    failed = run.result()
    assert failed.get("failed") and "no-go: esxi, vsphere" in failed["msg"]
    assert writes(stats) == ([], [])


def test_html_report_written_before_the_verdict(vsphere, tmp_path):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    design["supervisor"]["storage_policy"] = "gold-encrypted"
    report = tmp_path / "preflight.html"
    run, stats = preflight(vsphere, tmp_path, design=design, gpupool_preflight_report=str(report))
    assert run.rc != 0  # no-go, and the report is there to read
    res = run.result("Read every link, change nothing")
    page = report.read_text()
    assert page == res["html"] and page.startswith("<!DOCTYPE html>")
    assert "Result: no-go: vsphere." in page
    assert "storage policy &#x27;gold-encrypted&#x27; of the design&#x27;s namespaces is not in vCenter" in page
    assert "<tr class=\"go\"><td>esxi</td><td>go</td>" in page
    assert writes(stats) == ([], [])
