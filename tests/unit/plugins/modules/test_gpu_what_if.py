"""gpu_what_if through main(): the record made by the generator or from Prometheus (a fake of the PromClient its
room builds), written to record_dest; a replay on a fake replay cluster whose observations are known, so the
gate is seen: a proposal that breaches the training pool's SLO fails naming the pool, one that does not passes."""
import copy

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus import _prom
from ansible_collections.gpupool.vcf.plugins.modules import gpu_what_if
from tests.lib.module_main import run_main
from tests.lib.paths import ROOT

DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
RECORD = {"schema": "gpupool.vcf/workload-record", "version": 1, "workloads": [
    {"name": "first", "tenant": "team-vision", "pool": "training", "gpus": 4, "arrival": 0, "duration": 7200},
    {"name": "second", "tenant": "research", "pool": "training", "gpus": 4, "arrival": 60, "duration": 7200}]}


class FakeCluster:
    """Observations as a replay cluster would give them: with a 4-GPU ClusterQueue the second waits."""
    made = []

    def __init__(self, params, run):
        self.run, self.kept, self.quota = run, [], None
        FakeCluster.made.append(self)

    def kueue_served(self):
        return True

    def build(self, nodes, objects):
        [cq] = [o for o in objects if o["kind"] == "ClusterQueue"]
        resources = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        self.quota = int({r["name"]: r["nominalQuota"] for r in resources}["nvidia.com/gpu"])
        self.nodes = len(nodes)

    def replay(self, record, jobs, factor, poll):
        assert sorted(jobs) == ["first", "second"] and all(j["spec"]["suspend"] for j in jobs.values())
        second = 0.1 if self.quota >= 8 else 12.0
        return {"first": {"submitted": 0.0, "admitted": 0.0, "running": 0.0, "finished": 12.0},
                "second": {"submitted": 0.1, "admitted": second, "running": second, "finished": second + 12}}, 24.0

    def reset(self):
        pass

    def finish(self):
        pass


def cut(design, **slo):
    out = copy.deepcopy(design)
    [training] = [p for p in out["pools"] if p["name"] == "training"]
    training["node_pool"]["replicas"] = 1
    training["slo"].update(slo)
    return out


@pytest.fixture
def fake_cluster(monkeypatch):
    FakeCluster.made = []
    monkeypatch.setattr(gpu_what_if, "ReplayCluster", FakeCluster)
    return FakeCluster


def test_a_breaching_proposal_fails_naming_the_pool(fake_cluster, tmp_path):
    result = run_main(gpu_what_if, dict(design=DESIGN, proposed_design=cut(DESIGN), record=RECORD, kubeconfig="/k",
                                        report_dest=str(tmp_path / "r.txt"), html_dest=str(tmp_path / "r.html")))
    assert result["failed"] and "proposed design breaches the SLO of pool(s) training" in result["msg"]
    assert [b["pool"] for b in result["breaches"]] == ["training"]
    assert result["current"]["breaches"] == [] and result["proposed"]["pools"]["training"]["wait_p95"] == pytest.approx(7140)
    assert [c.quota for c in fake_cluster.made] == [4]  # one cluster object for both; the last build was the proposal
    assert "proposed design breaches: pool training" in (tmp_path / "r.txt").read_text()
    assert (tmp_path / "r.html").exists()


def test_a_proposal_within_its_slo_passes_and_check_mode_writes_nothing(fake_cluster, tmp_path):
    result = run_main(gpu_what_if, dict(design=DESIGN, proposed_design=cut(DESIGN, wait_seconds=20000), record=RECORD,
                                        kubeconfig="/k", report_dest=str(tmp_path / "r.txt")), check_mode=True)
    assert not result.get("failed"), result.get("msg")
    assert result["breaches"] == [] and not result["changed"]
    assert not (tmp_path / "r.txt").exists()


def test_a_record_for_a_tenant_without_quota_is_refused_before_the_cluster_is_touched(fake_cluster):
    bad = copy.deepcopy(RECORD)
    bad["workloads"][0]["tenant"] = "team-search"
    result = run_main(gpu_what_if, dict(design=DESIGN, record=bad, kubeconfig="/k"))
    assert result["failed"] and "tenant team-search has no GPU quota on pool training" in result["msg"]
    assert fake_cluster.made and fake_cluster.made[0].quota is None


def test_the_generator_writes_a_record_without_a_replay(tmp_path):
    dest = tmp_path / "week.yml"
    result = run_main(gpu_what_if, dict(replay=False, record_dest=str(dest), generate={"seed": 3, "hours": 24, "pools": {
        "training": {"arrivals_per_hour": 2, "mean_seconds": 600, "tenants": ["research"], "gpus": 4}}}))
    assert not result.get("failed"), result.get("msg")
    written = yaml.safe_load(dest.read_text())
    assert written["schema"] == "gpupool.vcf/workload-record" and len(written["workloads"]) == result["record"]["workloads"]
    assert result["record"]["source"] == "synthetic"


class FakeProm:
    queries = []

    def __init__(self, url, **kwargs):
        self.url = url

    def query(self, expr, at=None):
        FakeProm.queries.append(expr)
        pod = {"namespace": "research", "pod": "p-0", "uid": "u"}
        value = {"kube_pod_created": at - 3000, "kube_pod_start_time": at - 2900, "kube_pod_completion_time": at - 100}
        for series, v in value.items():
            if series in expr:
                return [{"metric": pod, "value": [at, str(v)]}]
        if "resource_requests" in expr:
            return [{"metric": dict(pod, pool="training"), "value": [at, "4"]}]
        return []


def test_the_record_from_prometheus(monkeypatch, tmp_path):
    monkeypatch.setattr(_prom, "PromClient", FakeProm)
    result = run_main(gpu_what_if, dict(replay=False, prometheus_url="https://prom.example.com", record_hours=1,
                                        record_dest=str(tmp_path / "r.yml"), anonymise=True))
    assert not result.get("failed"), result.get("msg")
    [w] = yaml.safe_load((tmp_path / "r.yml").read_text())["workloads"]
    assert (w["tenant"], w["pool"], w["gpus"], w["end"] - w["start"]) == ("tenant-1", "training", 4, 2800)
    assert len(FakeProm.queries) == 6


def test_bad_inputs_are_named():
    result = run_main(gpu_what_if, dict(design=DESIGN, record=RECORD, kubeconfig="/k", compression=0))
    assert result["failed"] and "compression must be from 1 to 100000" in result["msg"]
    result = run_main(gpu_what_if, dict(design=DESIGN, record={"schema": "x"}, kubeconfig="/k"))
    assert result["failed"] and "schema must be" in result["msg"]
