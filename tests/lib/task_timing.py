"""How long a task ran, from the json callback's output of a play (``run_module``/``run_playbook``'s ``.data``):
the benchmarks report the module's own time beside the wall-clock time of the whole ansible run."""
from datetime import datetime

FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def task_durations(data, name):
    """The seconds of each run of the task ``name`` (play by play, in order) that has a start and an end."""
    out = []
    for play in (data or {}).get("plays", []):
        for task in play.get("tasks", []):
            dur = task["task"].get("duration", {})
            if task["task"]["name"] == name and dur.get("start") and dur.get("end"):
                out.append((datetime.strptime(dur["end"], FORMAT) - datetime.strptime(dur["start"], FORMAT)).total_seconds())
    return out


def task_seconds(data, name="run", missing=float("nan")):
    """The seconds of the first run of the task ``name``; ``missing`` where it did not run."""
    return next(iter(task_durations(data, name)), missing)
