"""First contact with a GPU platform built by hand, through the platforms' own APIs and never the collection, of a
shape the example does not have: three GPU models in three clusters (A100 with MIG on GPU 1 of two hosts, L40S,
H100), two Supervisor namespaces made before (the VKS cluster's and a tenant's, REST), and a VKS node pool whose
taint the collection would not write (the Kubernetes client, on the rig as the Supervisor).

Then, as a new operator would: discover the design (no write on the platform); fill in the driver bundle
discovery cannot know and preflight with it (no write; the bundle is on a datastore vCenter lacks: named), then
as the operator's own restricted account (no write; the privilege it lacks is named too); the audit of the esxi,
vsphere and vks links with it is clean;
site.yml --check with it predicts no change; one field changed in the discovered design (the tenant's CPU limit)
and site.yml changes that namespace and nothing else of the platform.

Preflight with restricted accounts (the simulator's fleet accounts, tests/sim/vsphere README "Accounts and
privileges"): each missing privilege named with its link and objects, zero writes, the refusal of the change
itself; and over a design of two vCenters, each row naming its vCenter."""
import copy

import pytest
import yaml
import vsphere_sim
from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance  # noqa: F401 pylint: disable=unused-import
from kubernetes import dynamic

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import node_pool_labels
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._preflight import PRIVILEGES
from tests.integration.test_gpu_pool_discover import FLEET as DISCOVER_FLEET, changing
from tests.integration.test_multi_vcenter_chain import EAST, WEST
from tests.integration.test_multi_vcenter_chain import design as two_vcenter_design
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.hand_built import NAMESPACES, Rest, build_by_rest, platform_and_tenant, vgpu_class
from tests.lib.paths import ROOT

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
# the discovery test's platform (A100 with MIG on GPU 1 of two hosts, L40S, management) and an H100 cluster
A100, L40S, MGMT = DISCOVER_FLEET["clusters"]
H100 = {"name": "ai-h100", "hosts": [
    {"prefix": "h100-", "count": 3, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": DRIVER,
     "graphics": {"default": "sharedDirect", "policy": "performance"}}]}
FLEET = copy.deepcopy(dict(
    DISCOVER_FLEET, clusters=[A100, L40S, H100, MGMT],
    # the operator's account: every privilege the preflight asks, but the host patches, on the whole vCenter
    accounts=[{"user": "gpu-ops@vsphere.local", "password": "Ops-Passw0rd", "on": ["root"], "role": {
        "name": "gpu-operator", "privileges": sorted(set(p for _link, p, _scope, _what in PRIVILEGES) - {"Host.Config.Patch"})}}]))
SITE = ROOT / "playbooks" / "site.yml"
PREFLIGHT = ROOT / "playbooks" / "preflight.yml"
CAPI = "cluster.x-k8s.io"
OWN_TAINT = {"key": "dedicated", "value": "serving", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def build_vsphere(sim, platform):
    """Three vGPU classes (MIG, time-sliced, full card) and two namespaces, through the REST API."""
    build_by_rest(sim, [
        vgpu_class(cid, cpu, mem, profiles, description="made by hand: %s" % cid)
        for cid, cpu, mem, profiles in (("serve-a100", 8, 32768, ["grid_a100d-3-40c"]),
                                        ("lab-l40s", 4, 16384, ["nvidia_l40s-12c"]),
                                        ("train-h100", 32, 262144, ["nvidia_h100-80c"] * 2))
    ], platform_and_tenant(platform, ["serve-a100", "lab-l40s", "train-h100"], ["serve-a100", "train-h100"], "Team X",
                           description="platform team's VKS namespace"))


POOLS = (  # (class, shape, sharing, profile, vGPUs): the pools discovery will find for the three classes
    ("serve-a100", "inference", "mig", "grid_a100d-3-40c", 1),
    ("lab-l40s", "notebooks", "time_sliced", "nvidia_l40s-12c", 1),
    ("train-h100", "training", "full_card", "nvidia_h100-80c", 2))


def build_node_pool(api, namespace):
    """The VKS cluster (named as its namespace) with a GPU node pool per class, each with the labels and
    taints a GPU node pool of its class carries; serve-a100's is named "serving" and has one label of the
    team's and a taint of its own."""
    mds = []
    for cid, shape, sharing, profile, gpus in POOLS:
        pool = {"name": cid, "shape": shape, "sharing": sharing, "vgpu_profile": profile, "gpus_per_node": gpus,
                "node_pool": {}}
        labels = dict(node_pool_labels(pool))
        taints = [GPU_TAINT, {"key": "gpupool.vcf/pool", "value": cid, "effect": "NoSchedule"}]
        name = cid
        if cid == "serve-a100":
            labels["team"], taints, name = "x", [GPU_TAINT, OWN_TAINT], "serving"
        mds.append({"class": "node-pool", "name": name, "replicas": 1, "variables": {"overrides": [
            {"name": "vmClass", "value": cid}, {"name": "node", "value": {"labels": labels, "taints": taints}}]}})
    topo = {"classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
            "version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": mds},
            "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}]}
    clusters = dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/v1beta2", kind="Cluster")
    clusters.create(namespace=namespace, body={"apiVersion": f"{CAPI}/v1beta2", "kind": "Cluster",
                                               "metadata": {"name": namespace}, "spec": {"topology": topo}})
    return clusters


def writes(vsphere, action):
    """(what ``action()`` returned, the requests it sent that change state)."""
    before = vsphere.stats()
    out = action()
    return out, changing(before, vsphere.stats())


@pytest.fixture
def hand_built(vsphere, vsphere_env, k8s_rig, k8s_api, k8s_namespace, tmp_path):  # noqa: F811
    build_vsphere(vsphere, k8s_namespace)
    clusters = build_node_pool(k8s_api, k8s_namespace)
    return dict(env=vsphere_env, kubeconfig=str(k8s_rig.kubeconfig), namespace=k8s_namespace, clusters=clusters,
                tmp=tmp_path)


def test_first_contact_with_a_hand_built_platform(vsphere, hand_built):
    env, kubeconfig, tmp = hand_built["env"], hand_built["kubeconfig"], hand_built["tmp"]
    dest = tmp / "design.yml"
    res, sent = writes(vsphere, lambda: run_module("gpupool.vcf.gpu_pool_discover", {
        "dest": str(dest), "name": "hand-built", "supervisor_kubeconfig": kubeconfig}, env=env)[0])
    assert not res.get("failed"), res.get("msg")
    assert sent == {} and res["links_not_read"] == {}
    design = yaml.safe_load(dest.read_text())
    assert sorted((c["name"], c["gpu"]["model"]) for c in design["clusters"]) == [
        ("ai-a100", "A100-80GB"), ("ai-h100", "H100-80GB"), ("ai-l40s", "L40S")]
    pools = dict((p["vm_class"]["name"], p) for p in design["pools"])
    assert sorted((c, p["sharing"]) for c, p in pools.items()) == [
        ("lab-l40s", "time_sliced"), ("serve-a100", "mig"), ("train-h100", "full_card")]
    assert pools["serve-a100"]["node_pool"]["taints"] == [GPU_TAINT, OWN_TAINT]
    assert pools["serve-a100"]["node_pool"]["labels"] == {"team": "x"}
    assert design["vks_clusters"][0]["description"] == "platform team's VKS namespace"
    assert [t["name"] for t in design["tenants"]] == ["team-x"]

    # the operator fills in what discovery could not say: the driver's offline bundle (on a datastore this
    # vCenter does not have); preflight with that design only reads, and names the missing bundle
    text = dest.read_text()
    assert text.count('bundle: "FILL-IN') == 3
    for c in design["clusters"]:
        c["driver"]["bundle"] = "[gpu-depot] nvidia/NVD-AIE-%s.zip" % c["name"]
    dest.write_text(yaml.safe_dump(design, sort_keys=False))
    pre, sent = writes(vsphere, lambda: run_module("gpupool.vcf.gpu_pool_preflight", {
        "design_file": str(dest), "supervisor_kubeconfig": kubeconfig}, env=env)[0])
    assert sent == {}, sent
    assert not pre.get("failed") or "no-go" in pre.get("msg", ""), pre.get("msg")
    esxi = pre["links"]["esxi"]
    assert esxi["go"] is False and pre["go"] is False
    assert sorted(r.split(":")[0] for r in esxi["reasons"]) == ["cluster ai-a100", "cluster ai-h100", "cluster ai-l40s"]
    assert all("[gpu-depot]" in r and "datastore gpu-depot" in r for r in esxi["reasons"]), esxi

    # the same preflight as the operator's own account, which lacks the host patches: still no write; the
    # missing bundles and the missing privilege (every GPU host) are named, the vsphere link is go
    ops = dict(env, VMWARE_USER="gpu-ops@vsphere.local", VMWARE_PASSWORD="Ops-Passw0rd")
    pre, sent = writes(vsphere, lambda: run_module("gpupool.vcf.gpu_pool_preflight", {
        "design_file": str(dest), "supervisor_kubeconfig": kubeconfig}, env=ops)[0])
    assert sent == {}, sent
    hosts = ["host %s" % h for h in ("a100-01", "a100-02", "a100-03", "h100-01", "h100-02", "h100-03", "l40s-01", "l40s-02")]
    assert pre["missing_privileges"] == [dict(link="esxi", privilege="Host.Config.Patch", objects=hosts,
                                              what="the NVIDIA host driver (InstallHostPatchV2_Task)")]
    esxi = pre["links"]["esxi"]
    assert esxi["go"] is False and pre["links"]["vsphere"]["go"] is True
    assert [r for r in esxi["reasons"] if "datastore gpu-depot" in r] == list(esxi["reasons"][:3])
    assert esxi["reasons"][3:] == ["the account lacks privilege Host.Config.Patch on host a100-01, host a100-02, "
                                   "host a100-03 and 5 more (the NVIDIA host driver (InstallHostPatchV2_Task))"]

    # the audit of the links discovered is clean
    audit = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(dest), "links": ["esxi", "vsphere", "vks"], "supervisor_kubeconfig": kubeconfig},
        env=dict(env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))[0]
    assert not audit.get("failed"), audit.get("msg")
    assert audit["findings"] == []

    # site.yml --check with it: nothing to change on the links it reaches (no DLS, no guest given)
    extra = {"gpupool_design_file": str(dest), "gpupool_supervisor_kubeconfig": kubeconfig}
    run, sent = writes(vsphere, lambda: run_playbook(SITE, env=env, check=True, extra_vars=extra))
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stats.get("changed", 0) == 0, [n for n, r in run.tasks if r.get("changed")]
    assert sent == {}

    # one field changed: the tenant's CPU limit. site.yml changes that namespace and nothing else
    design["tenants"][0]["limits"]["cpu_mhz"] = 30000
    dest.write_text(yaml.safe_dump(design, sort_keys=False))
    topology = hand_built["clusters"].get(namespace=hand_built["namespace"], name=hand_built["namespace"]).to_dict()
    run, sent = writes(vsphere, lambda: run_playbook(SITE, env=env, extra_vars=extra))
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    changed = [n for n, r in run.tasks if r.get("changed")]
    # besides the namespace, only the run lease's bookkeeping (a custom attribute of each cluster, set and
    # cleared) is written
    objects = dict((k, v) for k, v in sent.items() if k not in ("soap SetField", "soap AddCustomFieldDef"))
    assert objects == {"rest PATCH %s/team-x" % NAMESPACES: 1}, (sent, changed)
    after = hand_built["clusters"].get(namespace=hand_built["namespace"], name=hand_built["namespace"]).to_dict()
    assert after["spec"]["topology"] == topology["spec"]["topology"]
    rest = Rest(vsphere)
    try:
        assert rest.call("GET", NAMESPACES + "/team-x")["resource_spec"]["cpu_limit"] == 30000
    finally:
        rest.close()


EXAMPLE_FLEET = yaml.safe_load((ROOT / "examples" / "fleet.yml").read_text())
for _vm in EXAMPLE_FLEET.get("vms") or []:  # YAML 1.1 reads power: on / off as booleans
    if isinstance(_vm.get("power"), bool):
        _vm["power"] = "on" if _vm["power"] else "off"
EXAMPLE_DESIGN = ROOT / "examples" / "design.yml"
ALL_ASKED = sorted(set(p for _link, p, _scope, _what in PRIVILEGES))
# the example's H100 hosts' operator: maintenance, graphics and module options, DRS overrides and the
# cluster's attributes, on cluster gpu-h100 only
H100_OPS = ["Host.Config.Maintenance", "Host.Config.Settings", "Host.Inventory.EditCluster", "Global.SetCustomField"]


def with_accounts(fleet, *accounts):
    out = dict(fleet)
    out["accounts"] = [{"user": user, "password": "Passw0rd-" + user.split("@")[0], "on": on,
                        "role": {"name": "role-" + user.split("@")[0], "privileges": privileges}}
                       for user, privileges, on in accounts]
    return out


def as_user(sim, user):
    return sim.env_as(user, "Passw0rd-" + user.split("@")[0])


def test_preflight_names_each_missing_privilege_and_the_refusal_is_vcenters():
    fleet = with_accounts(EXAMPLE_FLEET, ("h100-ops@vsphere.local", H100_OPS, ["gpu-h100"]),
                          ("gpu-admin@vsphere.local", ALL_ASKED, ["root"]))
    with vsphere_sim.start(fleet) as sim:
        # every privilege id the preflight asks is one vCenter defines: the role holding all of them was taken
        full, sent = writes(sim, lambda: run_module("gpupool.vcf.gpu_pool_preflight", {
            "design_file": str(EXAMPLE_DESIGN)}, env=as_user(sim, "gpu-admin@vsphere.local"))[0])
        assert not full.get("failed"), full.get("msg")
        assert full["go"] is True and full["missing_privileges"] == [] and sent == {}

        pre, sent = writes(sim, lambda: run_module("gpupool.vcf.gpu_pool_preflight", {
            "design_file": str(EXAMPLE_DESIGN)}, env=as_user(sim, "h100-ops@vsphere.local"))[0])
        assert sent == {}, sent
        assert pre["go"] is False
        assert pre["links"]["esxi"]["go"] is False and pre["links"]["vsphere"]["go"] is False
        l40s = ["host esx-l40s-0%d" % i for i in (1, 2, 3)]
        h100 = ["host esx-h100-0%d" % i for i in (1, 2, 3, 4)]
        assert [(m["link"], m["privilege"], m["objects"]) for m in pre["missing_privileges"]] == [
            ("esxi", "Host.Config.Settings", l40s),
            ("esxi", "Host.Config.Maintenance", l40s),
            ("esxi", "Host.Config.Patch", h100 + l40s),
            ("esxi", "Host.Inventory.EditCluster", ["cluster gpu-l40s"]),
            ("esxi", "Global.SetCustomField", ["cluster gpu-l40s"]),
            ("esxi", "Global.ManageCustomFields", ["vCenter root folder"]),
            ("vsphere", "VirtualMachineClasses.Manage", ["vCenter root folder"]),
            ("vsphere", "Namespaces.Manage", ["cluster gpu-h100"])]
        assert ("the account lacks privilege Namespaces.Manage on cluster gpu-h100 (vSphere Namespaces (VM classes, "
                "storage, limits, access))") in pre["links"]["vsphere"]["reasons"]

        # and vCenter refuses the change itself, naming the privilege; where the role holds it, it is made
        refused = run_module("gpupool.vcf.esxi_gpu_config", {"host": "esx-l40s-01", "assignment_policy": "performance"},
                             env=as_user(sim, "h100-ops@vsphere.local"))[0]
        assert refused.get("failed") and "NoPermission" in refused["msg"], refused
        assert "Host.Config.Settings" in refused["msg"], refused["msg"]
        assert sim.host_state("esx-l40s-01")["graphics"]["policy"] == "consolidation"
        done = run_module("gpupool.vcf.esxi_gpu_config", {"host": "esx-h100-01", "assignment_policy": "consolidation"},
                          env=as_user(sim, "h100-ops@vsphere.local"))[0]
        assert not done.get("failed") and done["changed"] is True, done.get("msg")
        assert sim.host_state("esx-h100-01")["graphics"]["policy"] == "consolidation"

    # a privilege id vCenter does not define (the vLCM image's is ...Specification.Write) is refused
    bad = with_accounts(EXAMPLE_FLEET, ("x@vsphere.local", ["VcIntegrity.lifecycleSoftwareSpecification.Modify"], []))
    with pytest.raises(vsphere_sim.SimulatorError, match="privilege id that vCenter does not define"):
        vsphere_sim.start(bad).stop()


def test_preflight_over_two_vcenters_names_the_vcenter_of_each_row(tmp_path):
    west_ops = ["Host.Config.Maintenance", "Host.Config.Settings", "Host.Inventory.EditCluster",
                "Global.SetCustomField", "Global.ManageCustomFields"]
    design = two_vcenter_design()
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(design))
    with vsphere_sim.start(EAST) as east, vsphere_sim.start(with_accounts(
            WEST, ("west-ops@vsphere.local", west_ops, ["root"]))) as west:
        env = {"VMWARE_HOST": "", "VMWARE_USER": "", "VMWARE_PASSWORD": "", "K8S_AUTH_KUBECONFIG": "", "PROMETHEUS_URL": ""}
        for name, sim, user in (("VC_EAST", east, east.user), ("VC_WEST", west, "west-ops@vsphere.local")):
            conn = sim.env if user == sim.user else as_user(sim, user)
            env.update({"GPUPOOL_VCENTER_%s_HOST" % name: sim.host, "GPUPOOL_VCENTER_%s_PORT" % name: str(sim.port),
                        "GPUPOOL_VCENTER_%s_USER" % name: conn["VMWARE_USER"],
                        "GPUPOOL_VCENTER_%s_PASSWORD" % name: conn["VMWARE_PASSWORD"],
                        "GPUPOOL_VCENTER_%s_CA_FILE" % name: sim.ca_file})
        before = (east.stats(), west.stats())
        run = run_playbook(PREFLIGHT, env=env, extra_vars={"preflight_design_file": str(path)})
        assert changing(before[0], east.stats()) == {} and changing(before[1], west.stats()) == {}
        assert run.rc != 0, run.stdout[-3000:]
        res = run.result("Read every link, change nothing")
        assert res["api_versions"] == {"vc-east": "8.0.3.0", "vc-west": "8.0.3.0"}
        west_hosts = "host esx-west-01, host esx-west-02, host esx-west-03"
        assert res["links"]["esxi"] == dict(go=False, status="no-go", reasons=[
            "vCenter vc-west: the account lacks privilege Host.Config.Patch on %s (the NVIDIA host driver "
            "(InstallHostPatchV2_Task))" % west_hosts])
        assert res["links"]["vsphere"] == dict(go=True, status="go", reasons=[])
        assert res["missing_privileges"] == [dict(vcenter="vc-west", link="esxi", privilege="Host.Config.Patch",
                                                  objects=west_hosts.split(", "),
                                                  what="the NVIDIA host driver (InstallHostPatchV2_Task)")]
        assert any("vCenter vc-west: the account lacks" in line for line in res["table"])
        assert "no-go: esxi" in run.result()["msg"]
