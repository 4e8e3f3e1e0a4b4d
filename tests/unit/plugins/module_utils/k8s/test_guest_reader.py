"""_guest_reader: a ConfigMap value that is not YAML is kept as text (so it is compared as text and differs), and
only that: a value that is not text at all is a bug upstream and is not hidden; LINK_FAILURES holds the link's own
failures and none of the collection's bugs."""
import pytest
from kubernetes.client.exceptions import ApiException, ApiTypeError
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import ProtocolError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s import _guest_reader
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError


def test_a_configmap_value_is_parsed_and_one_that_does_not_parse_is_kept_as_text():
    data = {"config.yaml": "version: v1\nsharing:\n  timeSlicing:\n    replicas: 4\n", "broken": "a: [", "tab": "\tx: 1"}
    out = _guest_reader._yaml_data(data)
    assert out == {"config.yaml": {"version": "v1", "sharing": {"timeSlicing": {"replicas": 4}}},
                   "broken": "a: [", "tab": "\tx: 1"}
    assert _guest_reader._yaml_data(None) == {}


def test_a_configmap_value_that_is_not_text_is_not_hidden_as_text():
    with pytest.raises(AttributeError):
        _guest_reader._yaml_data({"config.yaml": 5})


@pytest.mark.parametrize("exc", [K8sError("refused", kind="refused"), _guest_reader.LinkError("could not read"),
                                 ApiException(status=500), ConfigException("no context"), ProtocolError("dropped"),
                                 ConnectionResetError(104, "reset"), TimeoutError("timed out"),
                                 FileNotFoundError(2, "No such file")])
def test_link_failures_are_the_links_own(exc):
    assert isinstance(exc, _guest_reader.LINK_FAILURES)


@pytest.mark.parametrize("exc", [KeyError("x"), AttributeError("x"), TypeError("x"), ValueError("x"),
                                 ApiTypeError("Got an unexpected keyword argument")])
def test_a_bug_is_no_link_failure(exc):
    assert not isinstance(exc, _guest_reader.LINK_FAILURES)


# -- the notebook culler's objects, each read by its name ------------------------------------------

class FakeK8s:
    """The fault boundary over plain functions: a missing object is a 404, the objects are plain dicts already."""

    class api:  # pylint: disable=invalid-name
        @staticmethod
        def sanitize_for_serialization(obj):
            return dict(obj)

    def __init__(self):
        self.reads = []

    def call(self, fn, *args):
        self.reads.append((fn.__name__,) + args)
        found = fn(*args)
        if found is None:
            raise K8sError("404 not found", status=404)
        return found


class FakeApis:
    """The typed API classes of the kubernetes client, each read answered from `store` {(kind, namespace, name)}."""

    store = {}

    def __init__(self, api=None):
        for name, kind in (("read_namespace", "Namespace"), ("read_namespaced_service_account", "ServiceAccount"),
                           ("read_cluster_role", "ClusterRole"), ("read_cluster_role_binding", "ClusterRoleBinding"),
                           ("read_namespaced_config_map", "ConfigMap"), ("read_namespaced_cron_job", "CronJob"),
                           ("read_namespaced_deployment", "Deployment")):
            setattr(self, name, self._reader(name, kind))

    def _reader(self, name, kind):
        def read(obj_name, namespace=""):
            return FakeApis.store.get((kind, namespace, obj_name))
        read.__name__ = name
        return read

    @staticmethod
    def get_cluster_custom_object(group, version, plural, name):
        return FakeApis.store.get(("CustomResourceDefinition", "", name))


@pytest.fixture
def culler_store(monkeypatch):
    from kubernetes import client
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan
    monkeypatch.setattr(client, "CoreV1Api", FakeApis)
    monkeypatch.setattr(client, "RbacAuthorizationV1Api", FakeApis)
    FakeApis.store = {}
    policy = _guest_reader._audit_guest.guest_inputs({})[1]
    for obj in _guest_plan.culling_objects(dict(policy, gpu_scheduling_policy_culling="cronjob"), "print('x')\n"):
        FakeApis.store[_guest_plan.key(obj)] = _guest_plan.created(obj)
    return policy


def test_the_culler_is_read_object_by_object_as_its_plans_judge_it(culler_store):
    k8s, apis = FakeK8s(), FakeApis()
    out = _guest_reader._culling(k8s, apis, apis, culler_store, ["gpupool-system"], apis, objects=True)
    assert [o["kind"] for o in out["objects"]] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                                   "ConfigMap", "CronJob"]
    assert out["exists"] and out["schedule"] == "*/10 * * * *" and out["env"]["CULL_IDLE_MINUTES"] == "240"
    assert k8s.reads[0][0] == "get_cluster_custom_object"  # auto: is Kubeflow's Notebook CRD there
    # without its namespace, only the cluster's objects are read; discovery's read carries no objects
    k8s = FakeK8s()
    out = _guest_reader._culling(k8s, apis, apis, culler_store, [], apis)
    assert out == {"exists": False}
    assert [r[0] for r in k8s.reads] == ["get_cluster_custom_object", "read_cluster_role", "read_cluster_role_binding"]


def test_with_kubeflows_crd_its_notebook_controller_is_read(culler_store):
    FakeApis.store[("CustomResourceDefinition", "", "notebooks.kubeflow.org")] = {"kind": "CustomResourceDefinition"}
    apis = FakeApis()
    assert _guest_reader._culling(FakeK8s(), apis, apis, culler_store, ["kubeflow"], apis, objects=True) == {
        "kubeflow": True, "exists": False, "objects": []}
    deployment = {"kind": "Deployment", "metadata": {"name": "notebook-controller-deployment", "namespace": "kubeflow"},
                  "spec": {"template": {"spec": {"containers": [{"name": "manager", "env": [
                      {"name": "CULL_IDLE_TIME", "value": "1440"}]}]}}}}
    FakeApis.store[("Deployment", "kubeflow", "notebook-controller-deployment")] = deployment
    out = _guest_reader._culling(FakeK8s(), apis, apis, culler_store, ["kubeflow"], apis, objects=True)
    assert out == {"kubeflow": True, "exists": True, "env": {"CULL_IDLE_TIME": "1440"}, "objects": [deployment]}
