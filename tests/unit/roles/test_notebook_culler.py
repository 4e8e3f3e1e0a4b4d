"""The notebook culler script the gpu_scheduling_policy CronJob runs: idleness and owner lookup."""
import datetime
import importlib.util
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
