"""gpu_usage and playbooks/chargeback.yml against the rig with real Prometheus and
kube-state-metrics and the DCGM double: a known synthetic workload, its GPU-hours worked out by
hand from the times the test starts and stops pods, and the module within 1 %.

Workload (a 120 s period, every pod Running and scraped before it starts):

    team-a  a-serve  1 x nvidia.com/mig-3g.40gb on inference (nvidia_h100-3-40c)  whole period
    team-a  a-nb     2 x nvidia.com/gpu on notebooks (nvidia_l40s-8c, 4 replicas)   whole period
    team-b  b-train  4 x nvidia.com/gpu on training (nvidia_h100-80c)                whole period
    team-b  b-short  2 x nvidia.com/gpu on notebooks                                 deleted after ~60 s
"""
import csv
import json
import time
from pathlib import Path

import pytest
import yaml
from k8s_metrics_fixtures import k8s_metrics_rig  # noqa: F401  pylint: disable=unused-import
from kubernetes import client

from tests.lib.ansible_run import run_playbook
from tests.lib.helpers import prom, wait

ROOT = Path(__file__).resolve().parents[3]

HERE = Path(__file__).resolve().parent
RIG_NODES = HERE / "chargeback_nodes.yml"
RIG_DCGM_WORKLOAD = HERE / "chargeback_dcgm.yml"
PERIOD = 120
SHORT_AFTER = 60
SCRAPE = 1.0  # the rig's scrape interval (k8s_rig.start's default)
PODS = [("team-a", "a-serve", "inference", "nvidia.com/mig-3g.40gb", 1),
        ("team-a", "a-nb", "notebooks", "nvidia.com/gpu", 2),
        ("team-b", "b-train", "training", "nvidia.com/gpu", 4),
        ("team-b", "b-short", "notebooks", "nvidia.com/gpu", 2)]
# design prices: an H100 card 4.00 an hour, an L40S 1.20
CARD_HOUR = {"H100-80GB": 4.0, "L40S": 1.2}
UNIT_PRICE = {"inference": 4.0 / 2,        # 3g.40gb: two per H100
              "training": 4.0,             # a whole H100
              "notebooks": 1.2 / 6 / 4}    # 8 GB of a 48 GB L40S, shared by 4 replicas


def pod(namespace, name, pool, resource, count):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeSelector": {"gpupool.vcf/pool": pool}, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                     "resources": {"requests": {resource: str(count)},
                                                   "limits": {resource: str(count)}}}]}}


@pytest.fixture(scope="module")
def workload(k8s_metrics_rig):
    """Runs the workload; returns (start, end, deletion time of b-short)."""
    rig = k8s_metrics_rig
    core = client.CoreV1Api(rig.api_client())
    for ns in ("team-a", "team-b"):
        core.create_namespace({"metadata": {"name": ns}})
    for p in PODS:
        core.create_namespaced_pod(p[0], pod(*p))
    wait("4 Running pods", lambda: sum(1 for p in core.list_pod_for_all_namespaces().items
                                       if p.status.phase == "Running") == 4)
    # Prometheus has the requests of the 4 pods and the 8 GPUs of the double
    wait("the pods in Prometheus", lambda: prom(rig, 'count(kube_pod_container_resource_requests{resource=~"nvidia.+"}'
                                                     ' * on (namespace, pod) group_left () '
                                                     '(kube_pod_status_phase{phase="Running"} == 1)) == 4'))
    wait("the 9 GPUs in Prometheus", lambda: prom(rig, 'count(DCGM_FI_DEV_FB_USED{pod!=""}) == 9'))
    start = float(int(time.time()) + 2)
    time.sleep(start + SHORT_AFTER - time.time())
    core.delete_namespaced_pod("b-short", "team-b", grace_period_seconds=0)
    deleted = time.time()
    end = start + PERIOD
    time.sleep(max(0, end - time.time()) + 3 * SCRAPE)  # the samples up to the end are in
    return start, end, deleted


@pytest.fixture(scope="module")
def design_file(tmp_path_factory):
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    d["chargeback"] = {"currency": "EUR", "card_hour": CARD_HOUR}
    path = tmp_path_factory.mktemp("chargeback") / "design.yml"
    path.write_text(yaml.safe_dump(d))
    return path


@pytest.fixture(scope="module")
def chargeback(k8s_metrics_rig, workload, design_file, tmp_path_factory):
    start, end = workload[:2]
    out = tmp_path_factory.mktemp("reports")
    extra = dict(chargeback_prometheus_url=k8s_metrics_rig.prometheus_url, chargeback_design_file=str(design_file),
                 chargeback_start=str(int(start)), chargeback_end=str(int(end)), chargeback_step="1s",
                 chargeback_output_dir=str(out), chargeback_name="usage")
    res = run_playbook(ROOT / "playbooks" / "chargeback.yml", extra_vars=extra)
    assert res.rc == 0, res.stdout[-4000:] + res.stderr[-2000:]
    return res, out, extra


def by(rows, *key):
    return dict((tuple(r[k] for k in key), r) for r in rows)


def test_metrics_carry_the_names_the_module_joins_on(k8s_metrics_rig, workload):
    labels = prom(k8s_metrics_rig, 'kube_node_labels{node="inference-0"}')[0]["metric"]
    assert labels["label_gpupool_vcf_pool"] == "inference"
    assert labels["label_nvidia_com_vgpu_profile"] == "nvidia_h100-3-40c"
    req = prom(k8s_metrics_rig, 'kube_pod_container_resource_requests{pod="a-serve"}')
    assert {r["metric"]["resource"] for r in req} == {"nvidia_com_mig_3g_40gb"}
    assert req[0]["metric"]["node"].startswith("inference-")
    serve = prom(k8s_metrics_rig, 'DCGM_FI_DEV_FB_USED{pod="a-serve"}')[0]["metric"]
    assert (serve["namespace"], serve["container"], serve["GPU_I_PROFILE"]) == ("team-a", "main", "3g.40gb")
    assert serve["Hostname"] == req[0]["metric"]["node"] and serve["modelName"] == "GRID H100-3-40C"
    # DCGM reports no GPU_UTIL for MIG instances; the whole vGPUs have it
    assert prom(k8s_metrics_rig, 'DCGM_FI_DEV_GPU_UTIL{pod="a-serve"}') == []
    assert len(prom(k8s_metrics_rig, 'DCGM_FI_DEV_GPU_UTIL{pod="b-train"}')) == 4
    assert len(prom(k8s_metrics_rig, 'DCGM_FI_DEV_VGPU_LICENSE_STATUS{namespace="team-b"} == 1')) == 4


def test_gpu_hours_match_the_hand_count(workload, chargeback):
    start, deleted = workload[0], workload[2]
    res = chargeback[0]
    usage = res.result("Count GPU-hours from Prometheus and price them")
    rows = by(usage["rows"], "namespace", "pool", "profile", "resource")
    short_s = deleted - start
    hand = {  # GPU-seconds
        ("team-a", "inference", "nvidia_h100-3-40c", "nvidia.com/mig-3g.40gb"): 1 * PERIOD,
        ("team-a", "notebooks", "nvidia_l40s-8c", "nvidia.com/gpu"): 2 * PERIOD,
        ("team-b", "training", "nvidia_h100-80c", "nvidia.com/gpu"): 4 * PERIOD,
        ("team-b", "notebooks", "nvidia_l40s-8c", "nvidia.com/gpu"): 2 * short_s,
    }
    assert sorted(rows) == sorted(hand)
    for key, seconds in hand.items():
        got = rows[key]["gpu_hours"]
        if key[1] == "notebooks" and key[0] == "team-b":
            # one edge inside the period: Prometheus sees the deletion at its next scrape
            assert abs(got * 3600 - seconds) <= 2 * SCRAPE * 1.5, (key, got * 3600, seconds)
        else:
            assert got == pytest.approx(seconds / 3600.0, rel=0.01), key
    tenants = {"team-a": 3 * PERIOD, "team-b": 4 * PERIOD + 2 * short_s}
    for t in usage["by_tenant"]:
        assert t["gpu_hours"] == pytest.approx(tenants[t["namespace"]] / 3600.0, rel=0.01), t
    pools = {"inference": PERIOD, "training": 4 * PERIOD, "notebooks": 2 * PERIOD + 2 * short_s}
    for p in usage["by_pool"]:
        assert p["gpu_hours"] == pytest.approx(pools[p["pool"]] / 3600.0, rel=0.01), p
    total = sum(hand.values()) / 3600.0
    print("chargeback: module %.6f GPU-hours, by hand %.6f (%+.3f %%); b-short %.2f GPU-s, by hand %.2f"
          % (usage["gpu_hours"], total, 100 * (usage["gpu_hours"] / total - 1),
             rows[("team-b", "notebooks", "nvidia_l40s-8c", "nvidia.com/gpu")]["gpu_hours"] * 3600, 2 * short_s))
    assert usage["gpu_hours"] == pytest.approx(total, rel=0.01)
    cost = sum(seconds / 3600.0 * UNIT_PRICE[key[1]] for key, seconds in hand.items())
    assert usage["cost"] == pytest.approx(cost, rel=0.01) and usage["currency"] == "EUR"
    assert rows[("team-a", "inference", "nvidia_h100-3-40c", "nvidia.com/mig-3g.40gb")]["unit_price"] == \
        pytest.approx(2.0)


def test_efficiency_from_the_dcgm_double(chargeback):
    usage = chargeback[0].result("Count GPU-hours from Prometheus and price them")
    rows = by(usage["rows"], "namespace", "pool")
    assert rows[("team-a", "inference")]["engine_active"] == pytest.approx(0.8)
    assert rows[("team-a", "inference")]["fb_used_ratio"] == pytest.approx(0.5)
    assert rows[("team-b", "training")]["engine_active"] == pytest.approx(0.5)
    assert rows[("team-b", "training")]["fb_used_ratio"] == pytest.approx(0.75)
    assert rows[("team-a", "notebooks")]["engine_active"] == pytest.approx(0.25)
    assert rows[("team-a", "notebooks")]["fb_used_ratio"] == pytest.approx(0.25)


def test_report_files_and_a_rerun(chargeback):
    res, out, extra = chargeback
    usage = res.result("Count GPU-hours from Prometheus and price them")
    assert usage["changed"] is True
    assert sorted(p.name for p in out.iterdir()) == ["usage.csv", "usage.html", "usage.json"]
    assert json.loads((out / "usage.json").read_text())["gpu_hours"] == pytest.approx(usage["gpu_hours"])
    with open(out / "usage.csv") as fh:
        assert [r["namespace"] for r in csv.DictReader(fh)] == ["team-a", "team-a", "team-b", "team-b"]
    page = (out / "usage.html").read_text()
    assert page.count('class="bar"') == 4 and 'class="line"' in page and "<script" not in page
    again = run_playbook(ROOT / "playbooks" / "chargeback.yml", extra_vars=extra, check=True)
    assert again.rc == 0
    second = again.result("Count GPU-hours from Prometheus and price them")
    keys = list(json.loads((out / "usage.json").read_text()))
    differs = dict((k, (usage[k], second[k])) for k in keys if usage[k] != second[k])
    assert differs == {}  # the same period gives the same report
    assert (second["changed"], second["files_changed"]) == (False, [])


def test_prometheus_down_is_a_clear_failure(tmp_path):
    res = run_playbook(ROOT / "playbooks" / "chargeback.yml", extra_vars=dict(
        chargeback_prometheus_url="http://127.0.0.1:9", chargeback_start="now-1h", chargeback_step="60s",
        chargeback_output_dir=str(tmp_path), chargeback_design_file=""))
    assert res.rc != 0
    msg = res.result("Count GPU-hours from Prometheus and price them")["msg"]
    assert msg.startswith("Unable to query allocation from Prometheus: ") and "connection refused" in msg
    assert list(tmp_path.iterdir()) == []
