"""The whole chain's simulators for site.yml: vSphere, the Kubernetes rig, the DLS double.

The Kubernetes rig serves both as the Supervisor API (VKS Clusters) and as the guest cluster.
Its kwok nodes stand for the VMs of the design's node pools (the rig has no VM behind a node
pool), so they are made from the design: per node pool `replicas` nodes with its labels and taints.
A node named like a VM of the simulator's fleet follows that VM's power (tests/sim/power_bridge.py):
NotReady while the VM is off, Ready again when it is on, as its kubelet would.

    python tests/lib/chain.py up      # k8s rig (detached) + platform cluster + DLS double (+ power bridge
                                      # when `make sim-up` has started the vSphere simulator)
    python tests/lib/chain.py down

The ESXi hosts' shell: vsphere_with_ssh() starts the vSphere simulator with an ed25519 key pair of its
own (made with ssh-keygen in a state folder) among the hosts' authorized keys; ssh_vars() gives site.yml
the esxi_gpu_host_ssh_* variables for it, so the ESXi link sets MIG mode per GPU with nvidia-smi (the
simulator answers on one SSH listener per GPU host, GET /_sim/ssh, while the host's TSM-SSH service runs).
"""
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import types

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
for _p in (ROOT, ROOT / ".build" / "collections", ROOT / "tests" / "sim", ROOT / "tests" / "sim" / "dls"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive  # noqa: E402
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import POOL_LABEL  # noqa: E402
from tests.lib.paths import gpu_operator_chart  # noqa: E402

DESIGN = ROOT / "examples" / "design.yml"
CHART = gpu_operator_chart() or (ROOT / ".." / "shared" / "charts" / "gpu-operator").resolve()
SIM = ROOT / ".sim"
CAPI = "cluster.x-k8s.io/v1beta2"
CLASS = "builtin-generic-v3.4.0"


def ssh_key(folder):
    """An ed25519 key pair in ``folder`` (made once, no passphrase): (private key path, public key path)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / "id_ed25519"
    if not private.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpupool-chain", "-f", str(private)],
                       check=True)
    return private, folder / "id_ed25519.pub"


def vsphere_with_ssh(fleet, folder, **kwargs):
    """The vSphere simulator with the GPU hosts' SSH serving the key pair of ``folder`` (ssh_key()); the
    returned simulator carries ``key`` (the private key path)."""
    import vsphere_sim
    private, public = ssh_key(folder)
    sim = vsphere_sim.start(fleet, ssh_authorized_keys=public, **kwargs)
    sim.key = str(private)
    return sim


def ssh_vars(sim):
    """site.yml's (and esxi_gpu_host's) SSH variables for a simulator of vsphere_with_ssh(): the key, the
    per-host listener addresses; host keys not checked (the simulator makes new ones at every start)."""
    return {"esxi_gpu_host_ssh_private_key_file": sim.key, "esxi_gpu_host_ssh_addresses": sim.ssh_addresses(),
            "esxi_gpu_host_ssh_host_key_checking": False}


def derived(design=DESIGN):
    return derive(yaml.safe_load(pathlib.Path(design).read_text()))


def nodes_file(path, design=DESIGN):
    """A rig nodes file with the nodes of every node pool of the design's VKS clusters."""
    pools = []
    for cluster in derived(design)["vks"]["clusters"].values():
        for pool in cluster["node_pools"]:
            labels = dict(pool["labels"])
            labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1"})
            pools.append({"name": labels[POOL_LABEL], "count": pool["replicas"], "vmClass": pool["vm_class"],
                          "capacity": {"nvidia.com/gpu": "1"}, "labels": labels,
                          "taints": [dict(t) for t in pool["taints"]]})
    spec = {"defaults": {"cpu": "16", "memory": "64Gi",
                         "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
            "pools": pools + [{"name": "cpu", "count": 1, "vmClass": "best-effort-large"}]}
    pathlib.Path(path).write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def platform_clusters(api_client, design=DESIGN):
    """The design's VKS clusters as the platform team created them: a control plane, no GPU pools yet."""
    from kubernetes import client, dynamic
    core = client.CoreV1Api(api_client)
    clusters = dynamic.DynamicClient(api_client).resources.get(api_version=CAPI, kind="Cluster")
    made = []
    for vks in derived(design)["vks"]["clusters"].values():
        if vks["namespace"] not in [n.metadata.name for n in core.list_namespace().items]:
            core.create_namespace({"metadata": {"name": vks["namespace"]}})
        clusters.create(namespace=vks["namespace"], body={
            "apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": vks["name"]},
            "spec": {"topology": {
                "classRef": {"name": CLASS, "namespace": "vmware-system-vks-public"},
                "version": vks["version"], "controlPlane": {"replicas": 1},
                "workers": {"machineDeployments": []},
                "variables": [{"name": "vmClass", "value": "best-effort-large"},
                              {"name": "storageClass", "value": vks["storage_class"]}]}}})
        made.append("%s/%s" % (vks["namespace"], vks["name"]))
    return made


def kueue_as_released(api_client, config_file):
    """Kueue as its release manifests install it, for the role that writes waitForPodsReady: the
    ConfigMap kueue-system/kueue-manager-config holding the configuration the rig started Kueue with
    (`config_file`), and a stand-in Deployment whose pod carries the label of Kueue's controller pods
    (the rig runs Kueue as a process; the role deletes that pod after a change and waits for the new
    one). Nothing when the rig runs without Kueue (no such file). The process itself keeps the
    configuration it started with: tests/integration/k8s/test_kueue_gang_admission.py restarts it."""
    from kubernetes import client
    config_file = pathlib.Path(config_file)
    if not config_file.exists():
        return False
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    core.create_namespaced_config_map("kueue-system", {
        "metadata": {"name": "kueue-manager-config"},
        "data": {"controller_manager_config.yaml": config_file.read_text()}})
    labels = {"control-plane": "controller-manager", "app.kubernetes.io/name": "kueue"}
    apps.create_namespaced_deployment("kueue-system", {
        "metadata": {"name": "kueue-controller-manager", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {POOL_LABEL: "cpu"},
                     "containers": [{"name": "manager", "image": "registry.invalid/kueue:v0.17.0"}]}}}})
    return True


def site_vars(kubeconfig, dls, token_dir):
    """site.yml's connection variables for the rig (Supervisor and guest) and the DLS double."""
    import dls_double
    return {"gpupool_supervisor_kubeconfig": str(kubeconfig), "gpupool_guest_kubeconfig": str(kubeconfig),
            "gpupool_dls_host": dls.host, "gpupool_dls_port": dls.port,
            "gpupool_dls_username": dls_double.USERNAME, "gpupool_dls_password": dls_double.PASSWORD,
            "gpupool_dls_ca_file": dls.ca_file, "gpupool_token_dir": str(token_dir),
            "gpupool_gpu_operator_chart": str(CHART), "gpupool_gpu_operator_upgrade_crd": False}


def device_plugins(kubeconfig, log_file):
    """The device plugin of the time-sliced nodes (tests/sim/device_plugin_double.py), as a context manager: it
    advertises GPUs x replicas of the ConfigMap the gpu_operator role writes, read when its pod on the node starts.
    Without it no node runs a device plugin pod, and the gpu_operator role's restart of stale plugins fails."""
    import device_plugin_double
    op = derived()["roles"]["gpu_operator"]
    return device_plugin_double.running(
        kubeconfig, log_file, op["gpu_operator_namespace"],
        op["gpu_operator_device_plugin_config_name"], selector="nvidia.com/device-plugin.config",
        create_daemonset=True, default_config=op.get("gpu_operator_device_plugin_default_config", "default"))


@contextlib.contextmanager
def platform(vsphere_env, tmp, ssh=None):
    """The chain around a running vSphere simulator, for one test module: the Kubernetes rig (as
    Supervisor, with the platform's VKS cluster, and as guest) and the DLS double. Yields (rig, dls,
    env, site.yml variables); ``tmp`` holds the rig's nodes file and the token folder. ``ssh``: the
    simulator when it serves the hosts' SSH (vsphere_with_ssh), whose ssh_vars() the variables get.
    ``rig.power_bridge`` is the power bridge (its polls are vSphere requests too: a benchmark that counts
    the collection's requests stops it first)."""
    import dls_double
    import k8s_rig
    import power_bridge

    tmp = pathlib.Path(tmp)
    rig = k8s_rig.start(nodes_file=nodes_file(tmp / "nodes.yml"))
    dls = dls_double.start()
    bridge = None
    plugins = device_plugins(rig.kubeconfig, tmp / "device-plugin-double.log")
    plugins.__enter__()
    try:
        platform_clusters(rig.api_client())
        kueue_as_released(rig.api_client(), rig.data_dir / "kueue.yml")
        bridge = power_bridge.Bridge(simulator(vsphere_env), rig.api_client(), node_vms(rig.api_client())).start()
        rig.power_bridge = bridge
        extra = site_vars(rig.kubeconfig, dls, tmp / "tokens")
        if ssh is not None:
            extra.update(ssh_vars(ssh))
        yield rig, dls, dict(vsphere_env, PATH=rig.env["PATH"]), extra
    finally:
        plugins.__exit__(None, None, None)
        if bridge is not None:
            bridge.stop()
        dls.stop()
        rig.stop()


def simulator(vsphere_env):
    """The vSphere simulator's address and credentials, from its VMWARE_* environment."""
    return types.SimpleNamespace(host=vsphere_env["VMWARE_HOST"], port=int(vsphere_env["VMWARE_PORT"]),
                                 user=vsphere_env["VMWARE_USER"], password=vsphere_env["VMWARE_PASSWORD"],
                                 ca_file=vsphere_env["VMWARE_CA_FILE"])


def node_vms(api_client):
    """{VM name: node name} of the node VMs: a fleet's VM named like a rig node is that node's VM (the
    power bridge, tests/sim/power_bridge.py, makes the node NotReady while the VM is off, as a kubelet would)."""
    from kubernetes import client
    return dict((n.metadata.name, n.metadata.name) for n in client.CoreV1Api(api_client).list_node().items)


def _up():
    """Detached: the rig (`.sim/kubeconfig`), its platform cluster, and a DLS double in a child process."""
    SIM.mkdir(exist_ok=True)
    nodes = nodes_file(SIM / "chain-nodes.yml")
    subprocess.run([sys.executable, str(ROOT / "tests" / "sim" / "k8s_rig.py"), "up", "--nodes", str(nodes)],
                   check=True)
    from kubernetes import config
    api = config.new_client_from_config(str(SIM / "kubeconfig"))
    print("platform team's existing VKS cluster(s): %s" % ", ".join(platform_clusters(api)))
    kueue_as_released(api, SIM / "k8s" / "default" / "kueue.yml")
    proc = subprocess.Popen([sys.executable, __file__, "dls"], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    info = json.loads(proc.stdout.readline())
    (SIM / "dls.pid").write_text(str(proc.pid))
    extra = site_vars(SIM / "kubeconfig", type("D", (), info)(), SIM / "tokens")
    (SIM / "chain-vars.json").write_text(json.dumps(extra))
    print("DLS double at %s:%s; site.yml variables in %s" % (info["host"], info["port"], SIM / "chain-vars.json"))
    if info.get("bridge"):
        print("guest nodes named like node VMs follow their VMs' power (tests/sim/power_bridge.py)")


def _vsphere_env():
    """The VMWARE_* connection `make sim-up` wrote to .sim/vsphere.env, or None."""
    path = SIM / "vsphere.env"
    if not path.exists():
        return None
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _dls():
    """The detached child: the DLS double, the device plugin double, and the power bridge of the node VMs when the
    simulator is up."""
    import dls_double
    dls = dls_double.start()
    plugins = device_plugins(SIM / "kubeconfig", SIM / "device-plugin-double.log")
    plugins.__enter__()
    bridge = None
    vsphere_env = _vsphere_env()
    if vsphere_env:
        import power_bridge
        from kubernetes import config
        api = config.new_client_from_config(str(SIM / "kubeconfig"))
        bridge = power_bridge.Bridge(simulator(vsphere_env), api, node_vms(api)).start()
    print(json.dumps({"host": dls.host, "port": dls.port, "ca_file": dls.ca_file, "bridge": bridge is not None}),
          flush=True)

    def stop(*_args):
        plugins.__exit__(None, None, None)
        if bridge is not None:
            bridge.stop()
        dls.stop()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    while True:
        time.sleep(3600)


def _down():
    pid_file = SIM / "dls.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        pid_file.unlink()
    subprocess.run([sys.executable, str(ROOT / "tests" / "sim" / "k8s_rig.py"), "down"], check=False)


if __name__ == "__main__":
    {"up": _up, "down": _down, "dls": _dls}[sys.argv[1]]()
