"""Stop idle Jupyter notebooks: scale the owner of each idle notebook pod to 0.

Runs in a CronJob with a ServiceAccount (in-cluster API). A notebook is a pod matching
NOTEBOOK_SELECTOR. It is idle when both hold for its idle minutes:

- Jupyter: its server's status (NOTEBOOK_STATUS_URL, default ``http://{ip}:{port}/api/status``;
  ``{ip}``, ``{port}`` (NOTEBOOK_PORT), ``{namespace}`` and ``{pod}`` are filled in, so a server
  under a prefix such as ``/notebook/{namespace}/{pod}`` can be read) gives a last_activity older
  than the idle minutes;
- the GPU: with PROMETHEUS_URL set, and for a pod that requests GPUs, the highest DCGM engine
  activity of the pod's GPUs over the idle minutes is below GPU_IDLE_BELOW (a ratio 0-1). The
  series are dcgm-exporter's, labelled with the pod's ``namespace`` and ``pod``:
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio), else ``DCGM_FI_DEV_GPU_UTIL`` (percent) / 100 where
  the profiling fields are not collected. Without PROMETHEUS_URL the culler goes by Jupyter alone
  and says so in its log.

An idle pod has its StatefulSet (or Deployment) scaled to 0; its PersistentVolumeClaims are left
alone. The idle minutes of a pod are its pool's in CULL_POOL_IDLE_MINUTES (JSON, pool -> minutes;
the pool is the POOL_LABEL label of the pod's node), else CULL_IDLE_MINUTES.

A pod whose state cannot be read is kept: its Jupyter server does not answer, Prometheus does not
answer, or Prometheus has no engine activity for a pod that requests GPUs (dcgm-exporter without
its pod mapping, or a MIG instance it does not label). Each such pod, and each failed scale, gets a
Warning Event (source gpupool-notebook-culler) and the run exits 1, so that its Job is Failed;
a culled pod gets a Normal Event ``Culled``.
"""
import datetime
import json
import os
import ssl
import sys
import urllib.parse
import urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
COMPONENT = "gpupool-notebook-culler"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-")
STATUS_URL = "http://{ip}:{port}/api/status"


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


def requests_gpu(pod):
    """Whether a container of the pod asks for a GPU (whole, shared or a MIG instance)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        for name in list(res.get("limits") or {}) + list(res.get("requests") or {}):
            if name.startswith(GPU_RESOURCES):
                return True
    return False


def gpu_activity_query(namespace, pod, minutes):
    """The PromQL of the highest engine activity (ratio 0-1) of the pod's GPUs over `minutes`."""
    sel = '{namespace="%s",pod="%s"}' % (namespace.replace('"', ''), pod.replace('"', ''))
    return ("max(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE%s[%dm])) or "
            "max(max_over_time(DCGM_FI_DEV_GPU_UTIL%s[%dm])) / 100" % (sel, minutes, sel, minutes))


def gpu_activity(query, namespace, pod, minutes):
    """The highest engine activity of the pod's GPUs over `minutes` (``query(promql)`` returns
    Prometheus's result list), or None when Prometheus has no series of the pod. Errors of
    ``query`` pass through."""
    result = query(gpu_activity_query(namespace, pod, minutes))
    if not result:
        return None
    return max(float(r["value"][1]) for r in result)


def decide(jupyter_idle, gpu_needed, activity, below):
    """("cull" | "keep" | "unknown", why) for one notebook pod: `jupyter_idle` (bool), `gpu_needed`
    (whether its GPU activity is to be read: Prometheus is configured and the pod requests GPUs),
    `activity` (gpu_activity: a ratio, None for no series, or an Exception when Prometheus failed),
    `below` (the ratio under which a GPU is idle)."""
    if not jupyter_idle:
        return "keep", "Jupyter active"
    if not gpu_needed:
        return "cull", "Jupyter idle"
    if isinstance(activity, Exception):
        return "unknown", "Jupyter idle, GPU activity unknown: Prometheus query failed: %s" % (activity,)
    if activity is None:
        return "unknown", "Jupyter idle, GPU activity unknown: Prometheus has no DCGM engine activity of the pod"
    if activity >= below:
        return "keep", "Jupyter idle, GPU active (engine activity up to %.2f)" % activity
    return "cull", "Jupyter idle, GPU idle (engine activity up to %.2f, below %.2f)" % (activity, below)


def event(pod, reason, message, kind, now):
    """A core/v1 Event about the pod, from the culler."""
    meta = pod["metadata"]
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": meta["name"] + ".", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta.get("uid", "")},
            "reason": reason, "message": message[:1024], "type": kind, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "source": {"component": COMPONENT}}


class Api(object):
    def __init__(self, sa_dir=None):
        sa_dir = sa_dir or SA
        self.base = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
        with open(sa_dir + "/token") as f:
            self.token = f.read().strip()
        self.ctx = ssl.create_default_context(cafile=sa_dir + "/ca.crt")

    def call(self, path, method="GET", body=None, ctype="application/json"):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + self.token, "Content-Type": ctype})
        with urllib.request.urlopen(req, context=self.ctx, timeout=20) as r:
            return json.loads(r.read())


def prometheus(url):
    """``query(promql)`` -> result list of an instant query on the Prometheus at `url`."""
    def query(promql):
        with urllib.request.urlopen("%s/api/v1/query?query=%s" % (url.rstrip("/"), urllib.parse.quote(promql)),
                                    timeout=10) as r:
            answer = json.loads(r.read())
        if answer.get("status") != "success":
            raise ValueError("Prometheus: %s" % answer.get("error", answer.get("status")))
        return answer["data"]["result"]
    return query


def main(env=None, api=None, out=print):
    """One pass over the notebook pods; returns the exit status (1 when a pod's state could not be
    read or a scale failed)."""
    env = os.environ if env is None else env
    api = api or Api(env.get("SERVICE_ACCOUNT_DIR"))
    idle = int(env.get("CULL_IDLE_MINUTES", "240"))
    port = int(env.get("NOTEBOOK_PORT", "8888"))
    status_url = env.get("NOTEBOOK_STATUS_URL") or STATUS_URL
    selector = urllib.parse.quote(env.get("NOTEBOOK_SELECTOR", "gpupool.vcf/workload=notebook"))
    pools = json.loads(env.get("CULL_POOL_IDLE_MINUTES") or "{}")
    pool_label = env.get("POOL_LABEL", "gpupool.vcf/pool")
    below = float(env.get("GPU_IDLE_BELOW") or "0.05")
    prom_url = env.get("PROMETHEUS_URL") or ""
    query = prometheus(prom_url) if prom_url else None
    if not query:
        out("no PROMETHEUS_URL: idleness is Jupyter's last_activity alone, GPU activity is not read")
    nodes = {}
    failures = 0

    def node_labels(name):
        if name not in nodes:
            nodes[name] = api.call("/api/v1/nodes/" + urllib.parse.quote(name))["metadata"].get("labels") or {}
        return nodes[name]

    def warn(pod, reason, message):
        out("%s %s/%s: %s" % (reason, pod["metadata"]["namespace"], pod["metadata"]["name"], message))
        try:
            api.call("/api/v1/namespaces/%s/events" % pod["metadata"]["namespace"], "POST",
                     event(pod, reason, message, "Warning", now))
        except (OSError, ValueError) as e:
            out("could not record the event: %s" % (e,))

    now = datetime.datetime.now(datetime.timezone.utc)
    pods = api.call("/api/v1/pods?labelSelector=" + selector)["items"]
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or pod["status"].get("phase") != "Running":
            continue
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        url = status_url.format(ip=ip, port=port, namespace=ns, pod=name)
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                status = json.loads(r.read())
        except (OSError, ValueError) as e:
            failures += 1
            warn(pod, "CullCheckFailed", "Jupyter status %s not read: %s; the notebook is kept" % (url, e))
            continue
        minutes = idle_minutes_of(pod, pools, pool_label, idle, node_labels)
        jupyter_idle = bool(status.get("last_activity")) and is_idle(status["last_activity"], now, minutes)
        gpu_needed = bool(query) and requests_gpu(pod)
        activity = None
        if jupyter_idle and gpu_needed:
            try:
                activity = gpu_activity(query, ns, name, minutes)
            except (OSError, ValueError, KeyError) as e:
                activity = e
        verdict, why = decide(jupyter_idle, gpu_needed, activity, below)
        if verdict == "unknown":
            failures += 1
            warn(pod, "CullCheckFailed", why + "; the notebook is kept")
            continue
        if verdict == "keep":
            continue
        target = owner_to_scale(pod, api.call)
        if not target:
            out("idle %s/%s has no StatefulSet or Deployment to scale; left alone" % (ns, name))
            continue
        kind, tns, tname = target
        message = "culled %s %s/%s: %s for more than %d minutes (Jupyter idle since %s)" % (
            kind[:-1], tns, tname, why, minutes, status["last_activity"])
        try:
            api.call("/apis/apps/v1/namespaces/%s/%s/%s/scale" % (tns, kind, tname), "PATCH",
                     {"spec": {"replicas": 0}}, "application/merge-patch+json")
        except (OSError, ValueError) as e:
            failures += 1
            warn(pod, "CullFailed", "scaling %s %s/%s to 0 failed: %s" % (kind[:-1], tns, tname, e))
            continue
        out(message)
        try:
            api.call("/api/v1/namespaces/%s/events" % ns, "POST", event(pod, "Culled", message, "Normal", now))
        except (OSError, ValueError) as e:
            out("could not record the event: %s" % (e,))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
