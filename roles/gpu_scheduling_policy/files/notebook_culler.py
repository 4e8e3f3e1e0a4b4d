"""Stop idle Jupyter notebooks: scale the owner of each idle notebook pod to 0.

Runs in a CronJob with a ServiceAccount (in-cluster API). A notebook is a pod matching
NOTEBOOK_SELECTOR; its Jupyter server's /api/status gives last_activity; a pod idle longer
than its idle minutes has its StatefulSet (or Deployment) scaled to 0. Pods whose server
does not answer are left alone. The idle minutes of a pod are its pool's in
CULL_POOL_IDLE_MINUTES (JSON, pool -> minutes; the pool is the POOL_LABEL label of the pod's
node), else CULL_IDLE_MINUTES.
"""
import datetime
import json
import os
import ssl
import urllib.parse
import urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def parse_time(text):
    """Jupyter's ISO 8601 time (with Z or an offset) as an aware datetime."""
    text = text.strip().replace("Z", "+00:00")
    if "." in text:
        head, tail = text.split(".", 1)
        frac, sign, zone = tail, "", ""
        for s in ("+", "-"):
            if s in tail:
                frac, zone = tail.split(s, 1)
                sign = s
        text = "%s.%s%s%s" % (head, frac[:6].ljust(6, "0"), sign, zone)
    return datetime.datetime.fromisoformat(text)


def is_idle(last_activity, now, idle_minutes):
    return now - parse_time(last_activity) > datetime.timedelta(minutes=idle_minutes)


def owner_to_scale(pod, get):
    """(kind, namespace, name) of the workload to scale to 0, or None."""
    ns = pod["metadata"]["namespace"]
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref["kind"] == "StatefulSet":
            return ("statefulsets", ns, ref["name"])
        if ref["kind"] == "ReplicaSet":
            rs = get("/apis/apps/v1/namespaces/%s/replicasets/%s" % (ns, ref["name"]))
            for r in rs["metadata"].get("ownerReferences") or []:
                if r["kind"] == "Deployment":
                    return ("deployments", ns, r["name"])
    return None


def idle_minutes_of(pod, pools, pool_label, default, node_labels):
    """The idle minutes of one notebook pod: its node's pool's (``node_labels(node)`` reads the
    node's labels), else ``default``."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not pools or not node:
        return default
    pool = (node_labels(node) or {}).get(pool_label)
    return int(pools.get(pool, default))


class Api(object):
    def __init__(self):
        self.base = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
        with open(SA + "/token") as f:
            self.token = f.read().strip()
        self.ctx = ssl.create_default_context(cafile=SA + "/ca.crt")

    def call(self, path, method="GET", body=None, ctype="application/json"):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + self.token, "Content-Type": ctype})
        with urllib.request.urlopen(req, context=self.ctx, timeout=20) as r:
            return json.loads(r.read())


def main():
    api = Api()
    idle = int(os.environ.get("CULL_IDLE_MINUTES", "240"))
    port = int(os.environ.get("NOTEBOOK_PORT", "8888"))
    selector = urllib.parse.quote(os.environ.get("NOTEBOOK_SELECTOR", "gpupool.vcf/workload=notebook"))
    pools = json.loads(os.environ.get("CULL_POOL_IDLE_MINUTES") or "{}")
    pool_label = os.environ.get("POOL_LABEL", "gpupool.vcf/pool")
    nodes = {}

    def node_labels(name):
        if name not in nodes:
            nodes[name] = api.call("/api/v1/nodes/" + urllib.parse.quote(name))["metadata"].get("labels") or {}
        return nodes[name]

    now = datetime.datetime.now(datetime.timezone.utc)
    pods = api.call("/api/v1/pods?labelSelector=" + selector)["items"]
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or pod["status"].get("phase") != "Running":
            continue
        try:
            with urllib.request.urlopen("http://%s:%d/api/status" % (ip, port), timeout=5) as r:
                status = json.loads(r.read())
        except (OSError, ValueError):
            continue
        minutes = idle_minutes_of(pod, pools, pool_label, idle, node_labels)
        if not status.get("last_activity") or not is_idle(status["last_activity"], now, minutes):
            continue
        target = owner_to_scale(pod, api.call)
        if target:
            kind, ns, name = target
            api.call("/apis/apps/v1/namespaces/%s/%s/%s/scale" % (ns, kind, name), "PATCH",
                     {"spec": {"replicas": 0}}, "application/merge-patch+json")
            print("culled %s %s/%s (idle since %s, more than %d minutes)" % (
                kind[:-1], ns, name, status["last_activity"], minutes))


if __name__ == "__main__":
    main()
