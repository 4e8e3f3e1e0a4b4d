"""The Kubernetes rig's fixtures (tests/sim/k8s_fixtures.py) for this folder.

tests/conftest.py puts tests/sim on the import path; the fixtures are re-exported here so
pytest finds them for the tests of this folder.
"""
from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance

__all__ = ["k8s_api", "k8s_namespace", "k8s_rig", "k8s_rig_instance"]
