"""Where the tests find material that lives beside the repository, not in it."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART_IN_SHARED = pathlib.Path("shared") / "charts" / "gpu-operator"


def _origin_checkout():
    """The local checkout this clone was made from, if it was cloned from a path."""
    try:
        url = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                             capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return None
    if not url or "://" in url or url.startswith("git@"):
        return None
    path = pathlib.Path(url[len("file://"):] if url.startswith("file://") else url)
    return path if path.is_dir() else None


def gpu_operator_chart_candidates():
    """Places the real GPU Operator chart may be, best first."""
    out = []
    if os.environ.get("GPUPOOL_GPU_OPERATOR_CHART"):
        out.append(pathlib.Path(os.environ["GPUPOOL_GPU_OPERATOR_CHART"]))
    out.append(ROOT.parent / CHART_IN_SHARED)
    origin = _origin_checkout()
    if origin is not None:
        out.append(origin.resolve().parent / CHART_IN_SHARED)
    return out


def gpu_operator_chart():
    """The chart folder, or None (see gpu_operator_chart_missing for the message)."""
    for path in gpu_operator_chart_candidates():
        if (path / "Chart.yaml").is_file():
            return path.resolve()
    return None


def gpu_operator_chart_missing():
    return ("GPU Operator chart not found (looked in %s); the rig tests need the real chart: set "
            "GPUPOOL_GPU_OPERATOR_CHART or put it at ../shared/charts/gpu-operator beside the repository"
            % ", ".join(str(p) for p in gpu_operator_chart_candidates()))
