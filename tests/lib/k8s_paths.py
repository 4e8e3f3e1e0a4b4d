"""The API server's paths, as ``K8sClient.request`` sends them, routed to the fakes' methods named as the kubernetes
client's typed API names the same request (``read_node``, ``list_namespaced_pod``, ...): a fake of the unit tests
mixes in ``Paths`` and answers by path what it answered by method, so a client that requests by path runs on it
unchanged, and a request of a path the fake does not know fails the test by name."""
import re

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
