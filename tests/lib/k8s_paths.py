"""The API server's paths, as ``K8sClient.request`` sends them, routed to the fakes' methods named as the kubernetes
client's typed API names the same request (``read_node``, ``list_namespaced_pod``, ...): a fake of the unit tests
mixes in ``Paths`` and answers by path what it answered by method, so a client that requests by path runs on it
unchanged, and a request of a path the fake does not know fails the test by name. ``http_client`` goes one level
lower: a real K8sClient whose HTTP connection pool records each request and answers scripted statuses."""
import json
import re
from urllib.parse import parse_qsl, urlsplit

# (method, path pattern, the typed API's name, how its arguments are made from the match, the body and the query)
ROUTES = [
    ("GET", r"/api/v1/nodes", "list_node", lambda m, body, q: ((), q)),
    ("GET", r"/api/v1/nodes/(?P<name>[^/]+)", "read_node", lambda m, body, q: ((m["name"],), {})),
    ("PATCH", r"/api/v1/nodes/(?P<name>[^/]+)", "patch_node", lambda m, body, q: ((m["name"], body), {})),
    ("GET", r"/api/v1/pods", "list_pod_for_all_namespaces", lambda m, body, q: ((), q)),
    ("GET", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods", "list_namespaced_pod", lambda m, body, q: ((m["ns"],), q)),
    ("POST", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods", "create_namespaced_pod",
     lambda m, body, q: ((m["ns"], body), {})),
    ("GET", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)", "read_namespaced_pod",
     lambda m, body, q: ((m["name"], m["ns"]), {})),
    ("DELETE", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)", "delete_namespaced_pod",
     lambda m, body, q: ((m["name"], m["ns"]), {"body": body} if body else {})),
    ("POST", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/eviction", "create_namespaced_pod_eviction",
     lambda m, body, q: ((m["name"], m["ns"], body), {})),
    ("GET", r"/apis/policy/v1/poddisruptionbudgets", "list_pod_disruption_budget_for_all_namespaces",
     lambda m, body, q: ((), q)),
    ("GET", r"/apis/policy/v1/namespaces/(?P<ns>[^/]+)/poddisruptionbudgets", "list_namespaced_pod_disruption_budget",
     lambda m, body, q: ((m["ns"],), q)),
]
QUERY = ("label_selector", "field_selector")


def route(method, path):
    """(the typed API's name, its arguments' maker, the match) of a request, or AssertionError."""
    for verb, pattern, name, make in ROUTES:
        m = re.fullmatch(pattern, path)
        if verb == method and m:
            return name, make, m
    raise AssertionError("the fake serves no %s %s" % (method, path))


class Paths:
    """``request(method, path, body=None, ...)`` as ``K8sClient.request`` calls its dynamic client's."""

    def request(self, method, path, body=None, serializer=None, **params):
        name, make, m = route(method, path)
        query = dict((k, v) for k, v in params.items() if k in QUERY and v is not None)
        args, kwargs = make(m, body, query)
        return getattr(self, name)(*args, **kwargs)


class HttpPool:
    """The HTTP connection pool under the kubernetes client: records each request (method, path, query, headers,
    JSON body) and answers the next of `answers` ((status, JSON body)), the last one again when they run out."""

    def __init__(self, answers):
        self.answers, self.requests = list(answers), []

    def request(self, method, url, body=None, headers=None, **_kw):
        from urllib3.response import HTTPResponse
        parts = urlsplit(url)
        self.requests.append(dict(method=method, path=parts.path, query=dict(parse_qsl(parts.query)),
                                  headers=dict(headers or {}), body=json.loads(body) if body else None))
        status, data = self.answer(method, parts.path)
        return HTTPResponse(body=json.dumps(data).encode("utf-8"), status=status, reason="R%d" % status,
                            headers={"Content-Type": "application/json"}, preload_content=True)

    def answer(self, method, path):
        """(status, JSON) of the next request: the answers in turn, the last one again when they run out."""
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class StorePool(HttpPool):
    """An HttpPool that answers a GET of a path `store` holds with its JSON, and 404 (the API server's NotFound
    Status) for any other request."""

    def __init__(self, store):
        super().__init__([])
        self.store = store

    def answer(self, method, path):
        if method == "GET" and path in self.store:
            return 200, self.store[path]
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                     "message": "%s not found" % path}


def http_client(*answers, **kw):
    """(a K8sClient on an HttpPool of `answers`, the pool); `kw` for the K8sClient (attempts, sleep, ...)."""
    return _client(HttpPool(answers), **kw)


def store_client(store, **kw):
    """(a K8sClient on a StorePool of `store` {path: JSON}, the pool)."""
    return _client(StorePool(store), **kw)


def _client(pool, **kw):
    from kubernetes import client
    from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
    cfg = client.Configuration()
    cfg.host = "https://guest.example:6443"
    api = client.ApiClient(cfg)
    api.rest_client.pool_manager = pool
    return K8sClient(api=api, **dict(dict(attempts=3, sleep=lambda s: None, warn=False), **kw)), pool
