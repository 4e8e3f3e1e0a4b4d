"""pytest fixture of a Kubernetes rig with metrics (tests/sim/k8s_rig.py, ``metrics=True``):
kube-state-metrics, the DCGM double and Prometheus scraping both.

A test module sets ``RIG_NODES`` (a nodes file, default the rig's) and ``RIG_DCGM_WORKLOAD``
(the double's workload file, default every GPU pod at the double's defaults), imports the fixture
(``from k8s_metrics_fixtures import k8s_metrics_rig``) and gets a rig of its own, started once
for the module without Kueue, stopped after it. It fails (never skips) when the rig cannot start.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import k8s_rig as rig_launcher  # noqa: E402


@pytest.fixture(scope="module")
def k8s_metrics_rig(request):
    nodes = getattr(request.module, "RIG_NODES", None)
    workload = getattr(request.module, "RIG_DCGM_WORKLOAD", None)
    try:
        rig = rig_launcher.start(nodes_file=nodes, kueue=False, metrics=True, dcgm_workload=workload)
    except rig_launcher.RigError as e:
        pytest.fail(f"Kubernetes test rig with metrics did not start: {e}", pytrace=False)
    try:
        yield rig
    finally:
        rig.stop()
