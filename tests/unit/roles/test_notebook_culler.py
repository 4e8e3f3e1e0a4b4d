"""The notebook culler script the gpu_scheduling_policy CronJob runs: idleness and owner lookup."""
import datetime
import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "gpu_scheduling_policy" / "files" / "notebook_culler.py"
spec = importlib.util.spec_from_file_location("notebook_culler", SCRIPT)
culler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(culler)

NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.timezone.utc)


def test_jupyter_times_parse():
    assert culler.parse_time("2026-11-29T08:00:00.123456Z") == datetime.datetime(
        2026, 11, 29, 8, 0, 0, 123456, tzinfo=datetime.timezone.utc)
    assert culler.parse_time("2026-11-29T08:00:00.1Z").microsecond == 100000
    assert culler.parse_time("2026-11-29T09:00:00+01:00") == datetime.datetime(2026, 11, 29, 8, tzinfo=datetime.timezone.utc)


def test_idle_threshold():
    assert culler.is_idle("2026-11-29T07:59:00Z", NOW, 240)
    assert not culler.is_idle("2026-11-29T08:01:00Z", NOW, 240)


def test_owner_statefulset_and_deployment():
    sts_pod = {"metadata": {"namespace": "t", "ownerReferences": [{"kind": "StatefulSet", "name": "nb"}]}}
    assert culler.owner_to_scale(sts_pod, None) == ("statefulsets", "t", "nb")
    dep_pod = {"metadata": {"namespace": "t", "ownerReferences": [{"kind": "ReplicaSet", "name": "nb-5d8"}]}}

    def get(path):
        assert path == "/apis/apps/v1/namespaces/t/replicasets/nb-5d8"
        return {"metadata": {"ownerReferences": [{"kind": "Deployment", "name": "nb"}]}}
    assert culler.owner_to_scale(dep_pod, get) == ("deployments", "t", "nb")
    assert culler.owner_to_scale({"metadata": {"namespace": "t"}}, None) is None


# --- idleness: Jupyter and the GPU (DCGM engine activity from Prometheus) ---

GPU_POD = {"metadata": {"namespace": "t", "name": "nb-0", "uid": "u1",
                        "ownerReferences": [{"kind": "StatefulSet", "name": "nb"}]},
           "spec": {"nodeName": "n1", "containers": [{"name": "nb", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Running", "podIP": "10.0.0.5"}}


def test_decide_needs_jupyter_and_gpu_idle():
    assert culler.decide(True, True, 0.0, 0.05)[0] == "cull"
    assert culler.decide(True, True, 0.01, 0.05) == (
        "cull", "Jupyter idle, GPU idle (engine activity up to 0.01, below 0.05)")
    assert culler.decide(True, True, 0.9, 0.05) == ("keep", "Jupyter idle, GPU active (engine activity up to 0.90)")
    assert culler.decide(True, True, 0.05, 0.05)[0] == "keep"  # at the threshold is active
    assert culler.decide(False, True, 0.0, 0.05) == ("keep", "Jupyter active")
    assert culler.decide(False, False, None, 0.05) == ("keep", "Jupyter active")
    assert culler.decide(True, False, None, 0.05) == ("cull", "Jupyter idle")  # no Prometheus, or a pod without GPUs


def test_decide_unknown_gpu_state_keeps_the_pod():
    verdict, why = culler.decide(True, True, OSError("connection refused"), 0.05)
    assert verdict == "unknown" and "Prometheus query failed: connection refused" in why
    verdict, why = culler.decide(True, True, None, 0.05)
    assert verdict == "unknown" and "no DCGM engine activity" in why


def test_requests_gpu():
    assert culler.requests_gpu(GPU_POD)
    mig = {"spec": {"containers": [{"resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}}]}}
    shared = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}]}}
    assert culler.requests_gpu(mig) and culler.requests_gpu(shared)
    assert not culler.requests_gpu({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}})
    assert not culler.requests_gpu({"spec": {}})


def test_gpu_activity_query_and_result():
    q = culler.gpu_activity_query("team-a", "nb-0", 60)
    assert q == ('max(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="team-a",pod="nb-0"}[60m])) or '
                 'max(max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="team-a",pod="nb-0"}[60m])) / 100')
    asked = []

    def query(promql):
        asked.append(promql)
        return [{"metric": {}, "value": [1.0, "0.42"]}]
    assert culler.gpu_activity(query, "team-a", "nb-0", 60) == 0.42 and asked == [q]
    assert culler.gpu_activity(lambda promql: [], "team-a", "nb-0", 60) is None


class FakeApi(object):
    """The culler's API calls against one list of pods; records patches and events."""

    def __init__(self, pods, fail_scale=False):
        self.pods, self.fail_scale, self.calls = pods, fail_scale, []

    def call(self, path, method="GET", body=None, ctype="application/json"):
        self.calls.append((method, path, body))
        if path.startswith("/api/v1/pods?"):
            return {"items": self.pods}
        if path.endswith("/scale") and self.fail_scale:
            raise OSError("forbidden")
        return {}

    def events(self):
        return [(b["reason"], b["type"], b["involvedObject"]["name"], b["message"])
                for m, p, b in self.calls if m == "POST" and p.endswith("/events")]

    def scaled(self):
        return [p for m, p, b in self.calls if m == "PATCH"]


def run_main(monkeypatch, api, env, jupyter_last="2026-01-01T00:00:00Z", prom=None):
    """main() with Jupyter's answer `jupyter_last` and Prometheus's answer `prom` (a list, or an exception)."""
    import io

    def urlopen(url, timeout=None):
        if "/api/v1/query?" in url:
            if isinstance(prom, Exception):
                raise prom
            body = {"status": "success", "data": {"resultType": "vector", "result": prom}}
        else:
            assert url == "http://10.0.0.5:8888/api/status"
            body = {"last_activity": jupyter_last}
        return io.BytesIO(json.dumps(body).encode())
    monkeypatch.setattr(culler.urllib.request, "urlopen", urlopen)
    lines = []
    rc = culler.main(env=env, api=api, out=lines.append)
    return rc, lines


def test_main_culls_when_jupyter_and_gpu_are_idle(monkeypatch):
    api = FakeApi([GPU_POD])
    rc, lines = run_main(monkeypatch, api, {"CULL_IDLE_MINUTES": "60", "PROMETHEUS_URL": "http://prom:9090"},
                         prom=[{"metric": {}, "value": [1.0, "0"]}])
    assert rc == 0
    assert api.scaled() == ["/apis/apps/v1/namespaces/t/statefulsets/nb/scale"]
    [(reason, kind, name, message)] = api.events()
    assert (reason, kind, name) == ("Culled", "Normal", "nb-0") and "GPU idle" in message
    assert any(line.startswith("culled statefulset t/nb") for line in lines)


def test_main_keeps_a_computing_notebook(monkeypatch):
    api = FakeApi([GPU_POD])
    rc, dummy = run_main(monkeypatch, api, {"CULL_IDLE_MINUTES": "60", "PROMETHEUS_URL": "http://prom:9090"},
                         prom=[{"metric": {}, "value": [1.0, "0.8"]}])
    assert rc == 0 and api.scaled() == [] and api.events() == []


def test_main_prometheus_down_keeps_the_pod_and_says_so(monkeypatch):
    api = FakeApi([GPU_POD])
    rc, dummy = run_main(monkeypatch, api, {"CULL_IDLE_MINUTES": "60", "PROMETHEUS_URL": "http://prom:9090"},
                         prom=OSError("connection refused"))
    assert rc == 1 and api.scaled() == []
    [(reason, kind, name, message)] = api.events()
    assert (reason, kind, name) == ("CullCheckFailed", "Warning", "nb-0")
    assert "connection refused" in message and "kept" in message


def test_main_without_prometheus_goes_by_jupyter_and_logs_it(monkeypatch):
    api = FakeApi([GPU_POD])
    rc, lines = run_main(monkeypatch, api, {"CULL_IDLE_MINUTES": "60"})
    assert rc == 0 and api.scaled() == ["/apis/apps/v1/namespaces/t/statefulsets/nb/scale"]
    assert lines[0] == "no PROMETHEUS_URL: idleness is Jupyter's last_activity alone, GPU activity is not read"


def test_main_active_jupyter_reads_no_gpu(monkeypatch):
    api = FakeApi([GPU_POD])
    recent = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)).isoformat()
    rc, dummy = run_main(monkeypatch, api, {"CULL_IDLE_MINUTES": "60", "PROMETHEUS_URL": "http://prom:9090"},
                         jupyter_last=recent, prom=AssertionError("Prometheus is not asked"))
    assert rc == 0 and api.scaled() == [] and api.events() == []


def test_main_unreadable_jupyter_keeps_the_pod_and_says_so(monkeypatch):
    api = FakeApi([GPU_POD])

    def urlopen(url, timeout=None):
        raise OSError("no route to host")
    monkeypatch.setattr(culler.urllib.request, "urlopen", urlopen)
    assert culler.main(env={"CULL_IDLE_MINUTES": "60"}, api=api, out=lambda line: None) == 1
    assert api.scaled() == []
    [(reason, kind, name, message)] = api.events()
    assert (reason, kind, name) == ("CullCheckFailed", "Warning", "nb-0") and "no route to host" in message


def test_main_status_url_template(monkeypatch):
    pod = dict(GPU_POD, metadata=dict(GPU_POD["metadata"], namespace="team-a"))
    api = FakeApi([pod])
    asked = []

    def urlopen(url, timeout=None):
        import io
        asked.append(url)
        return io.BytesIO(b'{"last_activity": "2026-01-01T00:00:00Z"}')
    monkeypatch.setattr(culler.urllib.request, "urlopen", urlopen)
    env = {"NOTEBOOK_STATUS_URL": "http://{ip}:{port}/notebook/{namespace}/{pod}/api/status", "NOTEBOOK_PORT": "8080"}
    assert culler.main(env=env, api=api, out=lambda line: None) == 0
    assert asked == ["http://10.0.0.5:8080/notebook/team-a/nb-0/api/status"]


def test_main_failed_scale_is_an_event_and_exit_1(monkeypatch):
    api = FakeApi([GPU_POD], fail_scale=True)
    rc, dummy = run_main(monkeypatch, api, {"CULL_IDLE_MINUTES": "60"})
    assert rc == 1
    [(reason, kind, name, message)] = api.events()
    assert (reason, kind, name) == ("CullFailed", "Warning", "nb-0") and "forbidden" in message


def test_event_shape():
    now = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.timezone.utc)
    ev = culler.event(GPU_POD, "Culled", "m", "Normal", now)
    assert ev["metadata"] == {"generateName": "nb-0.", "namespace": "t"}
    assert ev["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "nb-0", "namespace": "t", "uid": "u1"}
    assert ev["source"] == {"component": "gpupool-notebook-culler"} and ev["lastTimestamp"] == "2026-11-29T12:00:00Z"
