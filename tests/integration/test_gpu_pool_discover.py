"""gpu_pool_discover against the vSphere simulator, on a platform built by hand (not the example): two GPU
models in two clusters, MIG on the second GPU of two of three hosts, VM classes and namespaces made through the REST API
directly. The design it writes validates, the audit of the vSphere links with it is clean (the descriptions made
by hand included), the platform sees no write; an existing dest is refused without force."""
import json

import yaml

from tests.lib.ansible_run import run_module
from tests.lib.hand_built import CLASSES, NAMESPACES, Rest, build_by_rest, platform_and_tenant, vgpu_class

__all__ = ["CLASSES", "NAMESPACES", "Rest", "build_by_hand", "changing"]  # the other first-contact tests use them

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
GRAPHICS = {"default": "sharedDirect", "policy": "performance"}
FLEET = {
    "datacenter": "DC0",
    "clusters": [
        {"name": "ai-a100", "supervisor": True, "hosts": [
            {"prefix": "a100-", "count": 2, "gpu": {"model": "A100-80GB", "count": 2}, "driver_version": DRIVER,
             "graphics": GRAPHICS, "mig": [1]},
            {"name": "a100-03", "gpu": {"model": "A100-80GB", "count": 2}, "driver_version": DRIVER,
             "graphics": GRAPHICS}]},
        {"name": "ai-l40s", "hosts": [
            {"prefix": "l40s-", "count": 2, "gpu": {"model": "L40S", "count": 1}, "driver_version": DRIVER,
             "graphics": {"default": "sharedDirect", "policy": "consolidation"}}]},
        {"name": "mgmt", "hosts": [{"prefix": "mgmt-", "count": 1}]},
    ],
    "vms": [],
}
# SOAP methods that only read (or open and close the session), compared in lower case
READ_SOAP = set(m.lower() for m in (
    "RetrieveServiceContent", "Login", "Logout", "RetrieveProperties", "RetrievePropertiesEx",
    "ContinueRetrievePropertiesEx", "CancelRetrievePropertiesEx", "CreateContainerView", "DestroyView",
    "CreatePropertyCollector", "DestroyPropertyCollector", "CurrentTime", "SessionIsActive",
    "FetchSoftwarePackages", "QueryConfiguredModuleOptionString", "QueryOptions",
    # a property fetched on its own, and the authorization manager's answer to "may this account ...?"
    "Fetch", "HasPrivilegeOnEntities", "FetchUserPrivilegeOnEntities"))


def build_by_hand(sim, platform="platform"):
    """VM classes and namespaces made through the REST API; ``platform``: the namespace of the VKS cluster."""
    build_by_rest(sim, [
        vgpu_class("serve-a100", 8, 32768, ["grid_a100d-3-40c"]),
        vgpu_class("lab-l40s", 4, 16384, ["nvidia_l40s-12c"]),
        {"id": "plain-small", "cpu_count": 2, "memory_MB": 4096},
    ], platform_and_tenant(platform, ["serve-a100", "lab-l40s"], ["serve-a100", "plain-small"], "Team X serving"))


def changing(before, after):
    """The requests sent between two reads of the simulator's counters that change something."""
    def counts(stats):
        return dict([("soap " + k, v) for k, v in stats["soap"]["methods"].items()]
                    + [("rest " + k, v) for k, v in stats["rest"]["paths"].items()])
    start, end = counts(before), counts(after)
    out = {}
    for key, number in end.items():
        kind, name = key.split(" ", 1)
        if number == start.get(key, 0) or (kind == "soap" and name.lower() in READ_SOAP):
            continue
        if kind == "rest" and (name.startswith("GET ") or name in ("POST /api/session", "DELETE /api/session")):
            continue
        out[key] = number - start.get(key, 0)
    return out


def discover(env, dest, **args):
    return run_module("gpupool.vcf.gpu_pool_discover", dict(dest=str(dest), name="hand-built", **args), env=env)[0]


def test_discover_validate_audit_and_no_write(vsphere, vsphere_env, tmp_path):
    build_by_hand(vsphere)
    dest = tmp_path / "design.yml"
    before = vsphere.stats()
    res = discover(vsphere_env, dest)
    assert not res.get("failed"), res.get("msg")
    assert changing(before, vsphere.stats()) == {}
    assert res["changed"] is True and oct(dest.stat().st_mode & 0o777) == "0o644"
    design = yaml.safe_load(dest.read_text())
    assert design == json.loads(json.dumps(res["design"]))
    clusters = dict((c["name"], c) for c in design["clusters"])
    assert sorted(clusters) == ["ai-a100", "ai-l40s"]  # mgmt has no GPU
    assert clusters["ai-a100"]["gpu"] == {"model": "A100-80GB", "per_host": 2} and clusters["ai-a100"]["hosts"] == 3
    assert clusters["ai-a100"]["mig_geometry"] == {"a100-01": [1], "a100-02": [1]} and "mig_geometry" not in clusters["ai-l40s"]
    assert clusters["ai-l40s"]["graphics"] == {"type": "shared_direct", "assignment_policy": "consolidation"}
    assert clusters["ai-a100"]["driver"]["version"] == DRIVER
    pools = dict((p["vm_class"]["name"], (p["cluster"], p["sharing"], p["vgpu_profile"])) for p in design["pools"])
    assert pools == {"serve-a100": ("ai-a100", "mig", "grid_a100d-3-40c"),
                     "lab-l40s": ("ai-l40s", "time_sliced", "nvidia_l40s-12c")}
    assert [(v["name"], v["namespace"]) for v in design["vks_clusters"]] == [("platform", "platform")]
    [tenant] = design["tenants"]
    assert tenant["name"] == "team-x" and list(tenant["gpu_quota"]) == ["serve-a100"]
    assert tenant["limits"] == {"cpu_mhz": 20000, "memory_mib": 65536, "storage_mib": 204800}
    assert "# the schema requires it and the vSphere side does not say: 0 chosen" in dest.read_text()

    # the design validates with gpu_pool_design's logic
    checked = run_module("gpupool.vcf.gpu_pool_design", {"design_file": str(dest)}, env=vsphere_env)[0]
    assert not checked.get("failed"), checked.get("msg")

    # the descriptions made by hand are in the design (the classes had none), so the audit of the links
    # discovered is clean
    assert dict((p["vm_class"]["name"], p["vm_class"]["description"]) for p in design["pools"]) == {
        "serve-a100": "", "lab-l40s": ""}
    assert tenant["description"] == "Team X serving"
    audit = run_module("gpupool.vcf.gpu_pool_audit", {"design_file": str(dest), "links": ["esxi", "vsphere"]},
                       env=dict(vsphere_env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))[0]
    assert not audit.get("failed"), audit.get("msg")
    assert audit["findings"] == []

    # rerun into the same path: refused without force, nothing written; with force the same content
    text = dest.read_text()
    again = discover(vsphere_env, dest)
    assert again.get("failed") and "it exists; give force: true" in again["msg"] and dest.read_text() == text
    forced = discover(vsphere_env, dest, force=True)
    assert not forced.get("failed"), forced.get("msg")
    assert forced["changed"] is False and dest.read_text() == text


def test_a_platform_without_gpu_hosts_gives_a_clear_message(vsphere, vsphere_env, tmp_path):
    # the same simulator session, the discovery narrowed to the management cluster: no host there has a GPU
    dest = tmp_path / "none.yml"
    res = discover(vsphere_env, dest, clusters=["mgmt"])
    assert res.get("failed") and "has no host with an NVIDIA GPU: there is no GPU pool to describe" in res["msg"]
    assert "clusters mgmt" in res["msg"] and not dest.exists()


def test_an_unreachable_link_is_named_in_the_design_and_the_result(vsphere, vsphere_env, tmp_path):
    # the Supervisor and the guest cluster at an address where nothing listens: the vSphere side is still
    # described, and the file and the result say which links were not read
    rest = Rest(vsphere)
    try:
        built = "serve-a100" in [c.get("id") for c in rest.call("GET", CLASSES)]
    finally:
        rest.close()
    if not built:  # the module's simulator is shared: the first test may have built it already
        build_by_hand(vsphere)
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "nowhere",
        "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "nobody"}}],
        "users": [{"name": "nobody", "user": {"token": "none"}}]}))
    dest = tmp_path / "partial.yml"
    res = discover(vsphere_env, dest, supervisor_kubeconfig=str(kubeconfig), kubeconfig=str(kubeconfig),
                   request_timeout=5)
    assert not res.get("failed"), res.get("msg")
    assert sorted(res["links_not_read"]) == ["guest", "vks"]
    text = dest.read_text()
    assert "# Links not read" in text and "#   guest: " in text and "#   vks: " in text
    design = yaml.safe_load(text)
    assert "guest" not in design and all(p["node_pool"]["replicas"] == 0 for p in design["pools"])
    assert "pools[0].node_pool.replicas: the schema requires it" in " ".join(res["notes"])
