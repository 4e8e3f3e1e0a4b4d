"""pytest fixtures for the Kubernetes test rig (tests/sim/k8s_rig.py).

With tests/sim on sys.path, import the fixtures into a conftest
(``from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance``) or load the
module as a plugin from the root conftest or with ``-p k8s_fixtures``. One rig per test session; each test gets its own namespace.
"""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import k8s_rig as rig_launcher  # noqa: E402
from tests.lib.helpers import wait as wait_for  # noqa: E402,F401  (the tests of the rig import it from here)


@pytest.fixture(scope="session")
def k8s_rig_instance():
    """The session's rig. Fails (never skips) when the rig cannot be built or started."""
    kueue = os.environ.get("GPUPOOL_K8S_KUEUE", "1") != "0"
    try:
        rig = rig_launcher.start(kueue=kueue)
    except rig_launcher.RigError as e:
        pytest.fail(f"Kubernetes test rig did not start: {e}", pytrace=False)
    try:
        yield rig
    finally:
        rig.stop()


@pytest.fixture(scope="session")
def k8s_rig(k8s_rig_instance):
    return k8s_rig_instance


@pytest.fixture(scope="session")
def k8s_api(k8s_rig):
    """A kubernetes.client.ApiClient for the rig (admin)."""
    return k8s_rig.api_client()


@pytest.fixture
def k8s_namespace(k8s_api, request):
    """A fresh namespace for one test, deleted afterwards (without waiting)."""
    from kubernetes import client

    core = client.CoreV1Api(k8s_api)
    base = request.node.name.lower().replace("_", "-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"gpupool.vcf/test": "true"}}})
    try:
        yield name
    finally:
        core.delete_namespace(name)
