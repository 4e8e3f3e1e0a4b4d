"""The Kubernetes rig's fixtures (tests/sim/k8s_fixtures.py) for this folder."""
import sys
from pathlib import Path

_SIM = str(Path(__file__).resolve().parents[2] / "sim")
if _SIM not in sys.path:
    sys.path.insert(0, _SIM)

from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance  # noqa: E402,F401
