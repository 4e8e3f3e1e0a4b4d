#!/usr/bin/env python3
"""Start and stop the Kubernetes test rig (see tests/sim/k8s/README.md).

A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), kwok as
the kubelet of a GPU node fleet described in tests/sim/k8s/nodes.yml, the Supervisor-like
Cluster API objects, and optionally the Kueue controller and metrics (Prometheus scraping
kube-state-metrics and the DCGM exporter double). Binaries come from `make k8s-build`.

    from tests.sim.k8s_rig import start
    with start() as rig:            # rig.kubeconfig, rig.env, rig.api_client()
        ...
        with rig.fault_proxy() as proxy:    # faults between clients and the API server
            ...

Command line: `k8s_rig.py up` (detached, kubeconfig at .sim/kubeconfig), `k8s_rig.py down`.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import itertools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "sim" / "k8s"
SIM = ROOT / ".sim"
BIN = SIM / "bin"
SHARE = SIM / "k8s-share"
DATA = SIM / "k8s"
DEFAULT_NODES = HERE / "nodes.yml"
POOL_LABEL = "gpupool.vcf/pool"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
# the CRDs Kueue v0.17 converts by webhook (and injects its CA into); the others are identical
# in v1beta1 and v1beta2 and keep conversion strategy None
KUEUE_CONVERTED = {f"{r}.kueue.x-k8s.io" for r in
                   ("localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters")}
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
METRICS_BINARIES = ("prometheus", "kube-state-metrics")
# node labels kube-state-metrics puts on kube_node_labels (it drops the others): the pool and
# vGPU profile the chargeback joins GPU requests to, and what GPU feature discovery says
NODE_LABELS_ALLOWED = ("gpupool.vcf/pool", "nvidia.com/vgpu.profile", "gpupool.vcf/sharing",
                       "nvidia.com/gpu.product", "nvidia.com/mig.strategy", "node.kubernetes.io/instance-type")
_RIG_NUMBERS = itertools.count(1)


class RigError(RuntimeError):
    """The rig could not be built, started or reached."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_ip() -> str | None:
    """First non-loopback IPv4 address of this machine (Endpoints reject loopback)."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for addr in out.split():
        if "." in addr and not addr.startswith(("127.", "169.254.")):
            return addr
    return None


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM when the process that started it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode:
        raise RigError(f"openssl {' '.join(args)} failed: {r.stderr.strip()}")


def _make_pki(pki: Path) -> None:
    """A CA, an API server certificate for 127.0.0.1 and a service-account key (EC P-256)."""
    if (pki / "apiserver.crt").exists():
        return
    tmp = Path(tempfile.mkdtemp(dir=pki.parent, prefix="pki."))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
             "-subj", "/CN=gpupool-vcf-test-ca", cwd=tmp)
    _openssl("req", *curve, "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=tmp)
    (tmp / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "apiserver.crt", "-days", "3650", "-extfile", "ext.cnf", cwd=tmp)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=tmp)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=tmp)
    for f in tmp.iterdir():
        f.chmod(0o600)
    shutil.rmtree(pki, ignore_errors=True)
    tmp.rename(pki)


def _write_kubeconfig(path: Path, server: str, ca: Path, token: str) -> None:
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gpupool-rig",
        "clusters": [{"name": "gpupool-rig", "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}}],
        "users": [{"name": "rig-admin", "user": {"token": token}}],
        "contexts": [{"name": "gpupool-rig", "context": {"cluster": "gpupool-rig", "user": "rig-admin"}}],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(cfg, f)
    os.chmod(path, 0o600)


def load_nodes(nodes_file: str | os.PathLike | None = None) -> list[dict]:
    """Node objects for every pool of a nodes file (see tests/sim/k8s/nodes.yml)."""
    spec = yaml.safe_load(Path(nodes_file or DEFAULT_NODES).read_text()) or {}
    defaults = spec.get("defaults", {})
    nodes = []
    for pool in spec.get("pools", []):
        name = pool["name"]
        capacity = {
            "cpu": str(pool.get("cpu", defaults.get("cpu", "8"))),
            "memory": str(pool.get("memory", defaults.get("memory", "32Gi"))),
            "pods": str(pool.get("pods", defaults.get("pods", "110"))),
            "ephemeral-storage": str(pool.get("ephemeralStorage", defaults.get("ephemeralStorage", "200Gi"))),
        }
        capacity.update({k: str(v) for k, v in (pool.get("capacity") or {}).items()})
        for i in range(int(pool.get("count", 1))):
            node_name = f"{name}-{i}"
            labels = dict(defaults.get("labels") or {})
            labels.update(pool.get("labels") or {})
            labels.update({POOL_LABEL: name, "kubernetes.io/hostname": node_name, "type": "kwok"})
            if pool.get("vmClass"):
                labels["node.kubernetes.io/instance-type"] = pool["vmClass"]
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node_name, "labels": labels,
                             "annotations": {KWOK_NODE_ANNOTATION: "fake",
                                             "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": [dict(t) for t in pool.get("taints") or []]},
                "status": {"capacity": capacity, "allocatable": capacity},
            })
    return nodes


class Rig:
    """A running rig. `kubeconfig` is the admin kubeconfig (token auth, mode 0600)."""

    def __init__(self, data_dir: Path, kubeconfig: Path, server: str, procs: dict, kueue: bool):
        self.data_dir = data_dir
        self.kubeconfig = kubeconfig
        self.server = server
        self.procs = procs  # name -> Popen (or pid when re-attached)
        self.kueue = kueue
        self.timings: dict[str, float] = {}
        self.prometheus_url: str | None = None   # http://127.0.0.1:<port> with metrics=True
        self.dcgm_url: str | None = None
        self.dcgm_workload: Path | None = None    # the DCGM double's workload file (rewrite to change values)
        self.kubelet_port: int | None = None      # kwok's kubelet API with pod_exec=True

    @property
    def env(self) -> dict:
        """Environment for kubectl-like tools, helm and Ansible modules against the rig."""
        env = dict(os.environ)
        env.update(KUBECONFIG=str(self.kubeconfig), K8S_AUTH_KUBECONFIG=str(self.kubeconfig),
                   PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
                   HELM_CACHE_HOME=str(self.data_dir / "helm" / "cache"),
                   HELM_CONFIG_HOME=str(self.data_dir / "helm" / "config"),
                   HELM_DATA_HOME=str(self.data_dir / "helm" / "data"))
        return env

    def api_client(self):
        from kubernetes import config as kconfig
        return kconfig.new_client_from_config(config_file=str(self.kubeconfig))

    def helm(self, *args: str, check: bool = True, timeout: int = 300) -> subprocess.CompletedProcess:
        r = subprocess.run([str(BIN / "helm"), *args], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode:
            raise RigError(f"helm {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def apply(self, objs: list[dict]) -> None:
        _apply(self.api_client(), objs)

    def exec_env(self, pod: str, namespace: str, env: dict) -> dict:
        """The Exec (kwok.x-k8s.io/v1alpha1) that runs an exec into every container of pod `namespace/pod`
        with `env` added to kwok's environment (a rig started with pod_exec=True); applied and returned."""
        obj = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec",
               "metadata": {"name": pod, "namespace": namespace},
               "spec": {"execs": [{"local": {"envs": [{"name": k, "value": str(v)} for k, v in env.items()]}}]}}
        _apply(self.api_client(), [obj])
        return obj

    def fault_proxy(self):
        """A fault-injecting HTTPS proxy in front of this rig's API server (tests/sim/k8s_proxy.py);
        its `kubeconfig` and `env` point clients at it. Stop it (or use `with`) after the test."""
        here = str(Path(__file__).resolve().parent)
        if here not in sys.path:
            sys.path.insert(0, here)
        from k8s_proxy import FaultProxy
        return FaultProxy.for_rig(self)

    def rss_kib(self) -> dict[str, int]:
        """Resident memory of each rig process, from /proc."""
        out = {}
        for name, p in self.procs.items():
            pid = p if isinstance(p, int) else p.pid
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1])
        return out

    def stop(self, keep: bool | None = None) -> None:
        """Stop every process; remove the data folder unless `keep` (or GPUPOOL_K8S_KEEP=1)."""
        if keep is None:
            keep = os.environ.get("GPUPOOL_K8S_KEEP") == "1"
        order = ["prometheus", "dcgm-double", "kube-state-metrics", "kueue", "kwok", "kube-scheduler",
                 "kube-controller-manager", "kube-apiserver", "etcd"]
        for name in sorted(self.procs, key=lambda n: order.index(n) if n in order else -1):
            _terminate(self.procs[name])
        self.procs = {}
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "pids.json").unlink()
        if not keep:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "Rig":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _terminate(p, timeout: float = 10) -> None:
    if isinstance(p, int):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                os.kill(p, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
        return
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _spawn(name: str, argv: list[str], data_dir: Path, detach: bool, env: dict | None = None):
    log = open(data_dir / f"{name}.log", "ab")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=data_dir, env=env, start_new_session=True,
                            preexec_fn=None if detach else _die_with_parent)


def _log_tail(data_dir: Path, name: str, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join((data_dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
    return ""


def _wait(what: str, check, timeout: float, procs: dict, data_dir: Path, interval: float = 0.1):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        for name, p in procs.items():
            if not isinstance(p, int) and p.poll() is not None:
                raise RigError(f"{name} exited ({p.returncode}) while waiting for {what}:\n"
                               + _log_tail(data_dir, name))
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - keep polling, report the last error
            last = e
        time.sleep(interval)
    raise RigError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last}); "
                   f"component logs in {data_dir}")


def _apply(api, objs: list[dict]) -> None:
    """Create or replace objects (server-side apply with a rig field manager)."""
    from kubernetes import dynamic
    dyn = dynamic.DynamicClient(api)
    for obj in objs:
        res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        ns = obj["metadata"].get("namespace")
        res.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=ns,
                              field_manager="gpupool-vcf-rig", force_conflicts=True)


def _yaml_objects(path: Path) -> list[dict]:
    objs = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        if "items" in doc and "kind" not in doc:
            objs.extend(doc["items"])
        else:
            objs.append(doc)
    return objs


def _kueue_objects(webhook_port: int, host_ip: str) -> list[dict]:
    """Kueue's CRDs (from the pinned module), with their conversion webhook pointed at the
    Kueue process through a selector-less Service whose Endpoints are this machine."""
    objs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
        # Kueue's certificate rotator fills this Secret (it must exist, as Kueue's manifests make it)
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": "kueue-webhook-server-cert", "namespace": "kueue-system"}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": webhook_port}]}},
        {"apiVersion": "v1", "kind": "Endpoints",
         "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"},
         "subsets": [{"addresses": [{"ip": host_ip}],
                      "ports": [{"name": "https", "port": webhook_port}]}]},
    ]
    crd_dir = SHARE / "kueue-crds"
    if not crd_dir.is_dir():
        raise RigError(f"Kueue CRDs missing under {crd_dir}: run `make k8s-build`")
    for f in sorted(crd_dir.glob("*.yaml")):
        for crd in _yaml_objects(f):
            if crd["metadata"]["name"] in KUEUE_CONVERTED:
                crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"namespace": "kueue-system",
                                                 "name": "kueue-webhook-service",
                                                 "path": "/convert", "port": 443}}}}
            objs.append(crd)
    return objs


def _sweep_dead_rigs() -> None:
    """Remove data folders of per-process rigs (rig-<pid>-<n>) whose process is gone (a killed test run)."""
    for d in DATA.glob("rig-*"):
        try:
            os.kill(int(d.name.split("-")[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, PermissionError):
            pass


def start(nodes_file: str | os.PathLike | None = None, kueue: bool = True, name: str | None = None,
          kubeconfig: str | os.PathLike | None = None, detach: bool = False,
          timeout: float = 120, metrics: bool = False, dcgm_workload: str | os.PathLike | None = None,
          scrape_interval: str = "1s", pod_exec: bool = False) -> Rig:
    """Start a rig with fresh state under .sim/k8s/<name>/ (default: rig-<pid>-<n>) and return it once usable:
    API ready, every node Ready and untainted by the node controller, the default
    ServiceAccount present, Supervisor objects applied, Kueue (if asked) serving; with
    `metrics`, kube-state-metrics, the DCGM double (values from `dcgm_workload`) and Prometheus
    scraping both every `scrape_interval`, both targets up. With `pod_exec`, kwok serves the kubelet's
    exec API (on 127.0.0.1, the nodes' InternalIP) and runs an exec into a pod as a local command, with
    the environment of the pod's Exec (kwok.x-k8s.io/v1alpha1, :meth:`Rig.exec_env`) and the rig's
    nvidia-smi double first on its PATH."""
    t0 = time.monotonic()
    missing = [b for b in BINARIES + (("kueue",) if kueue else ()) + (METRICS_BINARIES if metrics else ())
               if not (BIN / b).exists()]
    if missing:
        raise RigError(f"rig binaries missing in {BIN}: {', '.join(missing)}; run `make k8s-build`")
    _sweep_dead_rigs()
    # one folder per rig: a test process may hold several (a session's rig and a module's)
    name = name or f"rig-{os.getpid()}-{next(_RIG_NUMBERS)}"
    data_dir = DATA / name
    if data_dir.exists():
        pids = data_dir / "pids.json"
        if pids.exists():
            for pid in json.loads(pids.read_text()).values():
                _terminate(pid)
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    pki = data_dir / "pki"  # per rig: parallel test workers must not share certificate files
    _make_pki(pki)
    kubeconfig = Path(kubeconfig) if kubeconfig else data_dir / "kubeconfig"
    token = base64.b32encode(os.urandom(20)).decode().lower()
    tokens = data_dir / "tokens.csv"
    tokens.write_text(f'{token},rig-admin,rig-admin,"system:masters"\n')
    tokens.chmod(0o600)
    etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
    server = f"https://127.0.0.1:{api_port}"
    _write_kubeconfig(kubeconfig, server, pki / "ca.crt", token)
    procs: dict = {}
    rig = Rig(data_dir, kubeconfig, server, procs, kueue)
    try:
        _start(rig, data_dir, pki, token, etcd_port, peer_port, api_port, nodes_file, kueue, detach,
               timeout, t0, pod_exec)
        if metrics:
            _start_metrics(rig, detach, timeout, dcgm_workload, scrape_interval)
            rig.timings["metrics_s"] = round(time.monotonic() - t0, 2)
    except BaseException:
        rig.stop(keep=True)  # logs stay for the error report
        raise
    (data_dir / "pids.json").write_text(json.dumps({n: p.pid for n, p in procs.items()}))
    rig.timings["ready_s"] = round(time.monotonic() - t0, 2)
    return rig


def _start(rig, data_dir, pki, token, etcd_port, peer_port, api_port, nodes_file, kueue, detach,
           timeout, t0, pod_exec=False):
    procs = rig.procs
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    procs["etcd"] = _spawn("etcd", [
        str(BIN / "etcd"), "--name=rig", f"--data-dir={data_dir / 'etcd'}",
        f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=rig={peer_url}", "--unsafe-no-fsync", "--log-level=warn",
        "--quota-backend-bytes=1073741824"], data_dir, detach)
    procs["kube-apiserver"] = _spawn("kube-apiserver", [
        str(BIN / "kube-apiserver"), f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={data_dir / 'tokens.csv'}",
        "--authorization-mode=Node,RBAC", "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
        "--endpoint-reconciler-type=none", "--enable-aggregator-routing=true",
        "--profiling=false", f"--cert-dir={data_dir / 'apiserver-certs'}",
        # exec, logs and port-forward go to the node's InternalIP (kwok's --node-ip)
        "--kubelet-preferred-address-types=InternalIP"], data_dir, detach)
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))

    def readyz():
        req = urllib.request.Request(f"{rig.server}/readyz",
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=2) as r:
            return r.status == 200

    _wait("kube-apiserver /readyz", readyz, timeout, procs, data_dir)
    rig.timings["apiserver_s"] = round(time.monotonic() - t0, 2)
    common = [f"--kubeconfig={rig.kubeconfig}", "--leader-elect=false"]
    procs["kube-controller-manager"] = _spawn("kube-controller-manager", [
        str(BIN / "kube-controller-manager"), *common, "--secure-port=0",
        f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=false", f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--node-monitor-period=1s", "--concurrent-namespace-syncs=5"], data_dir, detach)
    procs["kube-scheduler"] = _spawn("kube-scheduler", [
        str(BIN / "kube-scheduler"), *common, "--secure-port=0"], data_dir, detach)
    kwok_server, kwok_env = ["--node-ip=10.0.0.1", "--server-address="], None
    if pod_exec:
        kwok_server, kwok_env = _pod_exec_server(rig, data_dir, pki, timeout)
    procs["kwok"] = _spawn("kwok", [
        str(BIN / "kwok"), f"--kubeconfig={rig.kubeconfig}", f"--config={HERE / 'kwok-stages.yml'}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
        "--cidr=10.244.0.0/16", "--node-lease-duration-seconds=40", *kwok_server], data_dir, detach, kwok_env)
    api = rig.api_client()
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    core = client.CoreV1Api(api)
    # Supervisor-like Cluster API CRDs first, then objects that use them
    crds = _yaml_objects(HERE / "crds" / "cluster-api.yml")
    _apply(api, crds)
    ext = client.ApiextensionsV1Api(api)

    def established(names):
        def check():
            for n in names:
                conds = ext.read_custom_resource_definition(n).status.conditions or []
                if not any(c.type == "Established" and c.status == "True" for c in conds):
                    return False
            return True
        return check

    _wait("Cluster API CRDs", established([c["metadata"]["name"] for c in crds]), timeout, procs, data_dir)
    host_ip = _host_ip() if kueue else None
    if kueue:
        if not host_ip:
            raise RigError("Kueue needs a non-loopback IPv4 address on this machine for its "
                           "conversion webhook endpoint; start the rig with kueue=False")
        webhook_port = _free_port()
        kobjs = _kueue_objects(webhook_port, host_ip)
        _apply(api, kobjs)
        kcrds = [o["metadata"]["name"] for o in kobjs if o["kind"] == "CustomResourceDefinition"]
        _wait("Kueue CRDs", established(kcrds), timeout, procs, data_dir)
        health_port = _free_port()
        kcfg = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook_port, "host": host_ip, "certDir": str(data_dir / "kueue-certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": True},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["batch/job"]},
            # the on-demand visibility API server needs in-cluster delegated authentication
            # and writes its certificate to /visibility: off
            "featureGates": {"VisibilityOnDemand": False},
        }
        (data_dir / "kueue.yml").write_text(yaml.safe_dump(kcfg))
        env = dict(os.environ, KUBECONFIG=str(rig.kubeconfig))
        procs["kueue"] = _spawn("kueue", [str(BIN / "kueue"), f"--config={data_dir / 'kueue.yml'}",
                                          "--zap-log-level=info"], data_dir, detach, env)
    _apply(api, _yaml_objects(HERE / "supervisor.yml"))
    nodes = load_nodes(nodes_file)
    for node in nodes:
        core.create_node(node)

    def nodes_ready():
        got = core.list_node(label_selector=POOL_LABEL).items
        if len(got) < len(nodes):
            return False
        for n in got:
            conds = n.status.conditions or []
            if not any(c.type == "Ready" and c.status == "True" for c in conds):
                return False
            if any(t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or []):
                return False
        return True

    _wait(f"{len(nodes)} kwok nodes Ready", nodes_ready, timeout, procs, data_dir, interval=0.2)

    def default_sa():
        try:
            core.read_namespaced_service_account("default", "default")
            return True
        except ApiException:
            return False

    _wait("default ServiceAccount", default_sa, timeout, procs, data_dir)
    if kueue:
        cert_dir = data_dir / "kueue-certs"

        def kueue_ready():
            # what a kubelet does for Kueue's pod: project the Secret its certificate rotator
            # fills into the webhook server's certificate folder
            if not (cert_dir / "tls.key").exists():
                data = core.read_namespaced_secret("kueue-webhook-server-cert", "kueue-system").data or {}
                if not {"tls.crt", "tls.key"} <= set(data):
                    return False
                cert_dir.mkdir(mode=0o700, exist_ok=True)
                for key, value in data.items():
                    f = cert_dir / key
                    f.write_bytes(base64.b64decode(value))
                    f.chmod(0o600)
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as r:
                if r.status != 200:
                    return False
            # Kueue has put its CA into the CRDs it converts
            for n in KUEUE_CONVERTED:
                conv = ext.read_custom_resource_definition(n).spec.conversion
                if not (conv.webhook and conv.webhook.client_config.ca_bundle):
                    return False
            return True

        _wait("Kueue readyz and its CA in the CRDs", kueue_ready, timeout, procs, data_dir, interval=0.3)


def _pod_exec_server(rig, data_dir, pki, timeout):
    """kwok's flags and environment for serving exec: the Exec CRD (established before kwok watches it), a
    TLS server on 127.0.0.1 (the nodes' InternalIP and kubelet port; the API server does not verify a
    kubelet's certificate without --kubelet-certificate-authority), nvidia-smi first on its PATH."""
    from kubernetes import client
    api = rig.api_client()
    crds = _yaml_objects(HERE / "crds" / "kwok-exec.yml")
    _apply(api, crds)
    ext = client.ApiextensionsV1Api(api)

    def established():
        conds = ext.read_custom_resource_definition(crds[0]["metadata"]["name"]).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conds)

    _wait("kwok Exec CRD", established, timeout, rig.procs, data_dir)
    tools = data_dir / "exec-bin"
    tools.mkdir(exist_ok=True)
    smi = tools / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'tests' / 'sim' / 'nvidia_smi_double.py'} \"$@\"\n")
    smi.chmod(0o755)
    port = _free_port()
    rig.kubelet_port = port
    env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    return ["--node-ip=127.0.0.1", f"--node-port={port}", f"--server-address=127.0.0.1:{port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            "--enable-crds=Exec"], env


def _http_json(url: str, timeout: float = 2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def _start_metrics(rig, detach, timeout, dcgm_workload, scrape_interval):
    """kube-state-metrics, the DCGM double and Prometheus scraping both (static targets)."""
    data_dir, procs = rig.data_dir, rig.procs
    ksm_port, ksm_telemetry, dcgm_port, prom_port = _free_port(), _free_port(), _free_port(), _free_port()
    procs["kube-state-metrics"] = _spawn("kube-state-metrics", [
        str(BIN / "kube-state-metrics"), f"--kubeconfig={rig.kubeconfig}",
        "--host=127.0.0.1", f"--port={ksm_port}",
        "--telemetry-host=127.0.0.1", f"--telemetry-port={ksm_telemetry}",
        "--resources=nodes,pods,namespaces,resourcequotas",
        "--metric-labels-allowlist=nodes=[%s]" % ",".join(NODE_LABELS_ALLOWED)], data_dir, detach)
    workload = data_dir / "dcgm-workload.yml"
    if dcgm_workload:
        shutil.copyfile(dcgm_workload, workload)
    else:
        workload.write_text("default: {}\npods: []\n")
    rig.dcgm_workload = workload
    procs["dcgm-double"] = _spawn("dcgm-double", [
        sys.executable, str(Path(__file__).resolve().parent / "dcgm_double.py"),
        f"--kubeconfig={rig.kubeconfig}", f"--port={dcgm_port}", f"--workload={workload}"], data_dir, detach)
    rig.dcgm_url = f"http://127.0.0.1:{dcgm_port}"
    cfg = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                   "evaluation_interval": scrape_interval},
        "scrape_configs": [
            # kube-state-metrics' own namespace/pod labels are the pods', not the target's
            {"job_name": "kube-state-metrics", "honor_labels": True,
             "static_configs": [{"targets": [f"127.0.0.1:{ksm_port}"]}]},
            {"job_name": "dcgm-exporter", "honor_labels": True,
             "static_configs": [{"targets": [f"127.0.0.1:{dcgm_port}"]}]},
        ],
    }
    (data_dir / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    procs["prometheus"] = _spawn("prometheus", [
        str(BIN / "prometheus"), f"--config.file={data_dir / 'prometheus.yml'}",
        f"--storage.tsdb.path={data_dir / 'prometheus'}", f"--web.listen-address=127.0.0.1:{prom_port}",
        "--storage.tsdb.retention.time=2d", "--log.level=warn"], data_dir, detach)
    rig.prometheus_url = f"http://127.0.0.1:{prom_port}"

    def targets_up():
        got = _http_json(f"{rig.prometheus_url}/api/v1/query?query=up")["data"]["result"]
        return len(got) == 2 and all(r["value"][1] == "1" for r in got)

    _wait("Prometheus with kube-state-metrics and the DCGM double up", targets_up, timeout, procs, data_dir,
          interval=0.3)

    from kubernetes import client
    node_count = len(client.CoreV1Api(rig.api_client()).list_node().items)

    def nodes_scraped():
        q = urllib.parse.quote("count(kube_node_labels)")
        got = _http_json(f"{rig.prometheus_url}/api/v1/query?query={q}")["data"]["result"]
        return bool(got) and int(float(got[0]["value"][1])) >= node_count

    _wait("kube_node_labels in Prometheus", nodes_scraped, timeout, procs, data_dir, interval=0.3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a detached rig; kubeconfig at .sim/kubeconfig")
    up.add_argument("--nodes", default=None, help="nodes file (default tests/sim/k8s/nodes.yml)")
    up.add_argument("--no-kueue", action="store_true")
    up.add_argument("--metrics", action="store_true",
                    help="also Prometheus, kube-state-metrics and the DCGM double (README, Metrics)")
    up.add_argument("--dcgm-workload", default=None, help="workload file of the DCGM double")
    sub.add_parser("down", help="stop the rig started by `up`")
    args = ap.parse_args(argv)
    data_dir = DATA / "default"
    if args.cmd == "down":
        pids = data_dir / "pids.json"
        if not pids.exists():
            print("k8s rig: not running")
            return 0
        for n, pid in reversed(list(json.loads(pids.read_text()).items())):
            _terminate(pid)
        pids.unlink()
        print("k8s rig: stopped")
        return 0
    rig = start(args.nodes, kueue=not args.no_kueue, name="default", kubeconfig=SIM / "kubeconfig",
                detach=True, metrics=args.metrics, dcgm_workload=args.dcgm_workload)
    print(f"k8s rig: ready in {rig.timings['ready_s']} s at {rig.server}; "
          f"KUBECONFIG={rig.kubeconfig}")
    if args.metrics:
        print(f"k8s rig: Prometheus at {rig.prometheus_url}, DCGM double at {rig.dcgm_url} "
              f"(workload {rig.dcgm_workload})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
