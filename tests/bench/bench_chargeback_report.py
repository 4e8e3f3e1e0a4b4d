"""Benchmark: the chargeback report over 30 days of samples of 1,000 GPU pods.

A synthetic workload (fixed seed): 1,000 GPU pods of 40 tenants on four pools (MIG 3g.40gb
inference, whole-H100 training, time-sliced L40S notebooks, and nodes without pool labels),
each Running for a random stretch of the 30 days, 1 to 8 GPUs, with its own engine activity
and framebuffer use. A small local HTTP server answers the module's PromQL as Prometheus
would from those samples at the 5-minute step (8,640 steps: 8.64 million pod-steps): the
allocation, engine and framebuffer sums per tenant, pool and profile (``sum_over_time`` of the
subquery), and the chart's range query per tenant in 48 buckets. The answers are computed
before the clock starts; what is timed is the collection's side: the module as users run it
(ansible-playbook: the HTTP calls, parsing, rows, totals, prices, JSON, CSV and HTML), and
the pure report code alone (pure/_chargeback.py) on the same answers.

The GPU-hours of the report are checked against the sum over the pods, exactly. Prometheus's
own evaluation of the subqueries over 30 days (the larger cost on a real server) is not part
of these figures.
"""
import argparse
import json
import pathlib
import random
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / ".build" / "collections")]

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback  # noqa: E402
from tests.lib.ansible_run import run_module  # noqa: E402

DAY = 86400
STEP = 300
POOLS = [("inference", "nvidia_h100-3-40c", "nvidia_com_mig_3g_40gb"),
         ("training", "nvidia_h100-80c", "nvidia_com_gpu"),
         ("notebooks", "nvidia_l40s-8c", "nvidia_com_gpu"),
         ("(none)", "(none)", "nvidia_com_gpu")]
# the example design, priced: an H100 4.00 EUR an hour, an L40S 1.20
DESIGN = dict(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()),
              chargeback={"currency": "EUR", "card_hour": {"H100-80GB": 4.0, "L40S": 1.2}})


def workload(pods, tenants, days, seed=14):
    """The pods: (namespace, pool, profile, resource, gpus, first step, last step, engine, fb used, fb total)."""
    rnd = random.Random(seed)
    steps = days * DAY // STEP
    out = []
    for _ in range(pods):
        pool, profile, resource = rnd.choice(POOLS)
        first = rnd.randrange(0, steps)
        last = min(steps, first + rnd.randrange(1, steps // 3))
        fb_total = 40960.0 if "3-40c" in profile else (81920.0 if "80c" in profile else 8192.0)
        out.append(("tenant-%02d" % rnd.randrange(tenants), pool, profile, resource, rnd.randint(1, 8), first, last,
                    round(rnd.random(), 3), round(fb_total * rnd.random()), fb_total))
    return out, steps


class Answers(object):
    """What Prometheus would answer to the module's queries on the workload, computed once."""

    def __init__(self, pods, steps, start):
        self.start, self.end, self.steps = start, start + steps * STEP, steps
        sums = defaultdict(lambda: defaultdict(float))
        for ns, pool, prof, res, gpus, first, last, engine, fb_used, fb_total in pods:
            n = last - first  # the steps the pod is Running at (each sample stands for the step before it)
            key = (ns, pool, prof)
            sums["allocation"][key + (res,)] += gpus * n
            # dcgm-exporter: one series per GPU of the pod
            sums["engine_sum"][key] += engine * gpus * n
            sums["engine_count"][key] += gpus * n
            sums["fb_used"][key] += fb_used * gpus * n
            sums["fb_total"][key] += fb_total * gpus * n
        self.vectors = {}
        for name, by_key in sums.items():
            labels = _chargeback.KEY if name == "allocation" else _chargeback.EFFICIENCY_KEY
            self.vectors[name] = [{"metric": dict((k, v) for k, v in zip(labels, key) if v != "(none)"),
                                   "value": [self.end, repr(total)]} for key, total in sorted(by_key.items())]
        self.pods = pods
        self.unit_steps = sum(gpus * (last - first) for _, _, _, _, gpus, first, last, _, _, _ in pods)
        self.matrix = None

    def timeline(self, first, last, size):
        """The range answer per tenant: allocation summed over the steps of each bucket."""
        per_bucket = int(size // STEP)
        ends = []
        t = first
        while t <= last + 1e-6:
            ends.append(t)
            t += size
        series = defaultdict(lambda: [0.0] * len(ends))
        for ns, _, _, _, gpus, p_first, p_last, _, _, _ in self.pods:
            for i, end in enumerate(ends):
                hi = int(round((end - self.start) / STEP))
                lo = hi - per_bucket
                overlap = min(hi, p_last) - max(lo, p_first)
                if overlap > 0:
                    series[ns][i] += gpus * overlap
        return [{"metric": {"namespace": ns}, "values": [[end, repr(v)] for end, v in zip(ends, vals)]}
                for ns, vals in sorted(series.items())]

    def answer(self, path, form):
        q = form.get("query", [""])[0]
        if path.endswith("/query_range"):
            if self.matrix is None:
                raise ValueError("the chart's range query was not computed")
            return {"resultType": "matrix", "result": self.matrix}
        if "kube_node_info" in q:
            name = None
        elif "kube_pod_container_resource_requests" in q:
            name = "allocation"
        elif "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in q:
            name = "engine_count" if q.startswith("sum_over_time((count by") else "engine_sum"
        elif "DCGM_FI_DEV_FB_FREE" in q:
            name = "fb_total"
        elif "DCGM_FI_DEV_FB_USED" in q:
            name = "fb_used"
        else:
            raise ValueError("query not understood: %s" % q[:200])
        window = re.search(r"\[(\d+)s:(\d+)s\]\)$", q)
        if name and (not window or int(window.group(2)) != STEP):
            raise ValueError("expected a %ds subquery: %s" % (STEP, q[-60:]))
        return {"resultType": "vector", "result": self.vectors.get(name, []) if name else []}


def serve(answers):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the server's name
            form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
            try:
                body = {"status": "success", "data": answers.answer(self.path, form)}
                code = 200
            except ValueError as exc:
                body, code = {"status": "error", "errorType": "bad_data", "error": str(exc)}, 400
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def task_seconds(play, name):
    """Seconds the named task ran, from the json callback's task duration."""
    from datetime import datetime
    for p in (play.data or {}).get("plays", []):
        for task in p.get("tasks", []):
            if task["task"]["name"] == name and task["task"].get("duration"):
                d = task["task"]["duration"]
                parse = lambda t: datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
                return (parse(d["end"]) - parse(d["start"])).total_seconds()
    return None


def pure_report(answers, size, table):
    t0 = time.perf_counter()
    results = dict((k, json.loads(json.dumps(v))) for k, v in answers.vectors.items())  # as parsed from the wire
    rep = _chargeback.report(results, answers.matrix, answers.start, answers.end, STEP, size, table)
    t1 = time.perf_counter()
    text = json.dumps(rep, indent=2)
    t2 = time.perf_counter()
    csv = _chargeback.csv_text(rep)
    t3 = time.perf_counter()
    page = _chargeback.html_text(rep)
    t4 = time.perf_counter()
    return rep, dict(rows=t1 - t0, json=t2 - t1, csv=t3 - t2, html=t4 - t3), (len(text), len(csv), len(page))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--tenants", type=int, default=40)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3, help="module runs (the median is printed)")
    args = ap.parse_args()

    t0 = time.monotonic()
    pods, steps = workload(args.pods, args.tenants, args.days)
    start = float(1_790_000_000 // STEP * STEP)
    answers = Answers(pods, steps, start)
    size, first, last = _chargeback.buckets(answers.start, answers.end, STEP)
    answers.matrix = answers.timeline(first, last, size)
    prep = time.monotonic() - t0
    hand_hours = answers.unit_steps * STEP / 3600.0
    print("workload: %d pods, %d tenants, %d days at %d s = %d steps (%.2f million pod-steps); "
          "answers prepared in %.2f s (not timed below)"
          % (len(pods), args.tenants, args.days, STEP, steps, len(pods) * steps / 1e6, prep))
    print("answers: allocation %d series, chart %d series x %d buckets"
          % (len(answers.vectors["allocation"]), len(answers.matrix), len(answers.matrix[0]["values"])))

    table = _chargeback.price_table(DESIGN)
    times = []
    for _ in range(3):
        rep, phase, sizes = pure_report(answers, size, table)
        times.append((sum(phase.values()), phase))
    total, phase = sorted(times, key=lambda t: t[0])[1]
    assert abs(rep["gpu_hours"] - hand_hours) <= 1e-6 * hand_hours, (rep["gpu_hours"], hand_hours)
    print("pure report code (median of 3): %.1f ms in all: rows, totals and prices %.1f ms, JSON %.1f ms, "
          "CSV %.1f ms, HTML with charts %.1f ms; %d rows, %.1f GPU-hours (= the pods' sum), %.2f EUR; "
          "JSON %d kB, CSV %d kB, HTML %d kB"
          % (1000 * total, 1000 * phase["rows"], 1000 * phase["json"], 1000 * phase["csv"], 1000 * phase["html"],
             len(rep["rows"]), rep["gpu_hours"], rep["cost"], sizes[0] // 1024, sizes[1] // 1024, sizes[2] // 1024))

    server = serve(answers)
    url = "http://127.0.0.1:%d" % server.server_address[1]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            design = pathlib.Path(tmp) / "design.json"
            design.write_text(json.dumps(DESIGN))
            runs = []
            for i in range(args.runs):
                out = pathlib.Path(tmp) / ("run%d" % i)
                out.mkdir()
                t = time.monotonic()
                res, play = run_module("gpupool.vcf.gpu_usage", dict(
                    prometheus_url=url, start="%d" % answers.start, end="%d" % answers.end, step="%ds" % STEP,
                    design_file=str(design), json_path=str(out / "u.json"), csv_path=str(out / "u.csv"),
                    html_path=str(out / "u.html")))
                wall = time.monotonic() - t
                if res.get("failed"):
                    raise SystemExit("gpu_usage failed: %s" % res.get("msg"))
                assert abs(res["gpu_hours"] - hand_hours) <= 1e-6 * hand_hours, (res["gpu_hours"], hand_hours)
                task = task_seconds(play, "run")
                runs.append((wall, task))
            runs.sort(key=lambda r: r[0])
            wall, task = runs[len(runs) // 2]
            print("module through ansible-playbook (median of %d): %.2f s for the whole ansible-playbook process%s; "
                  "6 queries answered; report of %.1f GPU-hours matches the pods' sum"
                  % (args.runs, wall, "" if task is None else ", %.2f s the task" % task, hand_hours))
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
