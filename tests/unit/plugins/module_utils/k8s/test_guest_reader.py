"""_guest_reader: a ConfigMap value that is not YAML is kept as text (so it is compared as text and differs), and
only that: a value that is not text at all is a bug upstream and is not hidden; LINK_FAILURES holds the link's own
failures and none of the collection's bugs."""
import copy

import pytest
from kubernetes.client.exceptions import ApiException, ApiTypeError
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import ProtocolError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s import _guest_reader
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_api import builtin_path
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
    """The fault boundary by path: ``store`` {path: object}; a path it does not hold is a 404, as the API answers."""

    def __init__(self, store):
        self.store, self.reads = store, []

    def request(self, method, path, body=None, **params):
        assert method == "GET" and body is None and not params, (method, path, body, params)
        self.reads.append(path)
        if path not in self.store:
            raise K8sError("404 not found", status=404)
        return copy.deepcopy(self.store[path])


@pytest.fixture
def culler_store():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan
    policy = _guest_reader._audit_guest.guest_inputs({})[1]
    store = {}
    for obj in _guest_plan.culling_objects(dict(policy, gpu_scheduling_policy_culling="cronjob"), "print('x')\n"):
        kind, ns, name = _guest_plan.key(obj)
        store[builtin_path(kind, ns, name)] = _guest_plan.created(obj)
    return policy, store


CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/notebooks.kubeflow.org"


def test_the_culler_is_read_object_by_object_as_its_plans_judge_it(culler_store):
    policy, store = culler_store
    k8s = FakeK8s(store)
    out = _guest_reader._culling(k8s, policy, ["gpupool-system"], objects=True)
    assert [o["kind"] for o in out["objects"]] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                                   "ConfigMap", "CronJob"]
    assert out["exists"] and out["schedule"] == "*/10 * * * *" and out["env"]["CULL_IDLE_MINUTES"] == "240"
    assert k8s.reads == [CRD,  # auto: is Kubeflow's Notebook CRD there
                         "/api/v1/namespaces/gpupool-system",
                         "/api/v1/namespaces/gpupool-system/serviceaccounts/gpupool-notebook-culler",
                         "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpupool-notebook-culler",
                         "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpupool-notebook-culler",
                         "/api/v1/namespaces/gpupool-system/configmaps/gpupool-notebook-culler",
                         "/apis/batch/v1/namespaces/gpupool-system/cronjobs/gpupool-notebook-culler"]
    # without its namespace, only the cluster's objects are read; discovery's read carries no objects
    k8s = FakeK8s(store)
    out = _guest_reader._culling(k8s, policy, [])
    assert out == {"exists": False}
    assert k8s.reads == [CRD, "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpupool-notebook-culler",
                         "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpupool-notebook-culler"]


def test_with_kubeflows_crd_its_notebook_controller_is_read(culler_store):
    policy, store = culler_store
    store[CRD] = {"kind": "CustomResourceDefinition"}
    assert _guest_reader._culling(FakeK8s(store), policy, ["kubeflow"], objects=True) == {
        "kubeflow": True, "exists": False, "objects": []}
    deployment = {"kind": "Deployment", "metadata": {"name": "notebook-controller-deployment", "namespace": "kubeflow"},
                  "spec": {"template": {"spec": {"containers": [{"name": "manager", "env": [
                      {"name": "CULL_IDLE_TIME", "value": "1440"}]}]}}}}
    store["/apis/apps/v1/namespaces/kubeflow/deployments/notebook-controller-deployment"] = deployment
    out = _guest_reader._culling(FakeK8s(store), policy, ["kubeflow"], objects=True)
    assert out == {"kubeflow": True, "exists": True, "env": {"CULL_IDLE_TIME": "1440"}, "objects": [deployment]}


def test_a_read_that_fails_names_what_could_not_be_read():
    class Refusing(FakeK8s):
        def request(self, method, path, body=None, **params):
            raise K8sError("the API server at https://guest:6443 answered 403 Forbidden", status=403)
    with pytest.raises(_guest_reader.LinkError) as raised:
        _guest_reader._culling(Refusing({}), _guest_reader._audit_guest.guest_inputs({})[1], [])
    assert str(raised.value) == ("could not read the CRD notebooks.kubeflow.org: the API server at https://guest:6443 "
                                 "answered 403 Forbidden")
