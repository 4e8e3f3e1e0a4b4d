"""NamespaceApi reads the Supervisors through Clusters.list on 8.x and Summary.list + Topology.get on 9.x."""
import types

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._namespace_api import NamespaceApi


class Rest:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def get(self, path, **_kw):
        self.calls.append(path)
        return self.answers[path]


class Soap:
    def __init__(self, version):
        self.content = types.SimpleNamespace(about=types.SimpleNamespace(apiVersion=version))
        self.retrievals = 0

    def clusters_by_name(self):
        self.retrievals += 1
        return {"gpu-a": types.SimpleNamespace(moid="domain-c1"), "plain": types.SimpleNamespace(moid="domain-c7")}


CLUSTERS = "/api/vcenter/namespace-management/clusters"
SUMMARIES = "/api/vcenter/namespace-management/supervisors/summaries"
TOPOLOGY = "/api/vcenter/namespace-management/supervisors/sv-1/topology"
ANSWERS = {
    CLUSTERS: [{"cluster": "domain-c1", "cluster_name": "gpu-a", "config_status": "RUNNING", "kubernetes_status": "READY"}],
    SUMMARIES: {"items": [{"supervisor": "sv-1", "info": {"name": "sv", "config_status": "RUNNING", "kubernetes_status": "READY"}}]},
    TOPOLOGY: [{"zone": "zone-a", "clusters": ["domain-c1"]}],
}


def test_on_8x_the_cluster_keyed_list():
    rest, soap = Rest(ANSWERS), Soap("8.0.3.0")
    rows = NamespaceApi(rest, lambda: soap).supervisors()
    assert rest.calls == [CLUSTERS] and soap.retrievals == 0
    assert rows == [dict(ANSWERS[CLUSTERS][0], supervisor=None, supervisor_name=None)]


def test_on_9x_the_per_supervisor_calls_give_the_same_rows():
    rest, soap = Rest(ANSWERS), Soap("9.1.0.0")
    rows = NamespaceApi(rest, lambda: soap).supervisors()
    assert rest.calls == [SUMMARIES, TOPOLOGY] and soap.retrievals == 1
    assert [(r["cluster"], r["cluster_name"], r["config_status"], r["kubernetes_status"], r["supervisor"]) for r in rows] == [
        ("domain-c1", "gpu-a", "RUNNING", "READY", "sv-1")]


def test_a_version_given_is_not_read_again():
    rest = Rest(ANSWERS)
    rows = NamespaceApi(rest, None, api_version="9.0.0.0").supervisors()
    assert rest.calls == [SUMMARIES, TOPOLOGY] and rows[0]["cluster_name"] is None


def test_no_soap_session_and_no_version_keeps_the_8x_call():
    rest = Rest(ANSWERS)
    NamespaceApi(rest).supervisors()
    assert rest.calls == [CLUSTERS]


def test_a_version_reader_is_called_once_and_no_session_is_opened_on_8x():
    rest, reads, sessions = Rest(ANSWERS), [], []

    def version():
        reads.append(1)
        return "8.0.3.0"

    def soap():
        sessions.append(1)
        return Soap("8.0.3.0")

    api = NamespaceApi(rest, soap, api_version=version)
    api.supervisors()
    api.supervisors()
    assert rest.calls == [CLUSTERS, CLUSTERS] and reads == [1] and sessions == []


def test_a_version_reader_on_9x_opens_the_session_only_for_the_cluster_names():
    rest, soap = Rest(ANSWERS), Soap("9.1.0.0")
    rows = NamespaceApi(rest, lambda: soap, api_version=lambda: "9.1.0.0").supervisors()
    assert soap.retrievals == 1 and rows[0]["cluster_name"] == "gpu-a"
