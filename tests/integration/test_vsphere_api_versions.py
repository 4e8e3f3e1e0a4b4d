"""The core vSphere paths of the collection against a simulator presenting API 8.0.3 and one presenting 9.0.

Both simulators hold the example fleet (examples/fleet.yml, which examples/design.yml describes).
At each version: which version the collection's client negotiated (pyvmomi's stub and the
ServiceContent's About, and the version every SOAP call of the modules named, as the simulator
counted them); then gpu_host_info, esxi_gpu_config in check mode, vm_class (create, rerun,
delete) and gpu_pool_audit's esxi and vsphere links in one playbook; the results must be the
same at both versions. Also: the simulator's own SOAP calls (vcsim's REST handlers) are
neither refused for their version nor counted as the client's.
"""
import copy
import ssl
import urllib.request
import xml.etree.ElementTree as ET

import pytest

import vsphere_sim
from tests.lib.ansible_run import ROOT, run_playbook

FLEET = ROOT / "examples" / "fleet.yml"
DESIGN_FILE = str(ROOT / "examples" / "design.yml")

# simulator option -> (About.apiVersion, About.version, pyvmomi's version name once negotiated)
VERSIONS = {
    "8.0.3": ("8.0.3.0", "8.0.3", "vim.version.v8_0_3_0"),
    "9.0": ("9.0.0.0", "9.0.0", "vim.version.v9_0_0_0"),
}

_RESULTS = {}


@pytest.fixture(scope="module")
def sims():
    started = {}
    try:
        for version in VERSIONS:
            started[version] = vsphere_sim.start(FLEET, api_version=version)
        yield started
    finally:
        for sim in started.values():
            sim.stop()


def client_of(sim):
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient
    return VsphereClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)


def service_versions(sim):
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    url = "https://%s:%d/sdk/vimServiceVersions.xml" % (sim.host, sim.port)
    with urllib.request.urlopen(url, context=ctx, timeout=30) as res:
        root = ET.fromstring(res.read())
    ns = root.find("namespace")
    assert ns.findtext("name") == "urn:vim25"
    return ns.findtext("version"), [v.text for v in ns.findall("priorVersions/version")]


@pytest.mark.parametrize("version", list(VERSIONS))
def test_client_negotiates_the_presented_version(sims, version):
    api, about_version, negotiated = VERSIONS[version]
    sim = sims[version]
    current, prior = service_versions(sim)
    assert current == api
    assert "8.0.2.0" in prior and "7.0.3.0" in prior and api not in prior
    assert ("8.0.3.0" in prior) is (version == "9.0")
    sim.reset_stats()
    client = client_of(sim)
    try:
        assert client.si._stub.version == negotiated  # pylint: disable=protected-access
        about = client.content.about
        assert (about.apiVersion, about.version) == (api, about_version)
        assert about.fullName.startswith("VMware vCenter Server %s" % about_version)
        from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vm_class_api import api_version
        assert api_version(client) == api
    finally:
        client.close()
    assert sim.stats()["soap"]["versions"] == {api: sim.stats()["soap"]["total"]}


def test_older_client_served_newer_version_refused(sims):
    from pyVim import connect
    from pyVmomi import vmodl

    # a vSphere 8 client (pyvmomi 8.0.3) against vCenter 9.0: served at 8.0.3
    sim = sims["9.0"]
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx,
                              preferredApiVersions=["vim.version.v8_0_3_0"])
    try:
        assert si._stub.version == "vim.version.v8_0_3_0"  # pylint: disable=protected-access
        assert si.RetrieveContent().about.apiVersion == "9.0.0.0"
    finally:
        connect.Disconnect(si)

    # vCenter 8.0.3 does not serve 9.0: a client that insists is refused before login
    sim = sims["8.0.3"]
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    with pytest.raises(vmodl.fault.InvalidRequest) as err:
        connect.Connect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx,
                        version="vim.version.v9_0_0_0")
    assert err.value.msg == "Request version 'urn:vim25/9.0.0.0' and namespace 'urn:vim25' are not supported"


GPU_CONFIG = {"host": "esx-h100-01", "graphics_type": "shared_direct", "assignment_policy": "consolidation",
              "scheduler": {"policy": "equal_share", "time_slice_ms": 3}}
VM_CLASS = {"name": "gpu-api-versions", "cpu_count": 4, "memory_mb": 16384, "vgpu_profiles": ["nvidia_h100-1-10c"],
            "cluster": "gpu-h100", "description": "both API versions"}

PLAY = [{
    "name": "core vSphere paths",
    "hosts": "localhost",
    "gather_facts": False,
    "tasks": [
        {"name": "host info", "gpupool.vcf.gpu_host_info": {"cluster": "gpu-h100"}},
        {"name": "gpu config check", "check_mode": True, "diff": True,
         "gpupool.vcf.esxi_gpu_config": GPU_CONFIG},
        {"name": "vm class create", "gpupool.vcf.vm_class": VM_CLASS},
        {"name": "vm class rerun", "gpupool.vcf.vm_class": VM_CLASS},
        {"name": "vm class delete", "gpupool.vcf.vm_class": {"name": VM_CLASS["name"], "state": "absent"}},
        {"name": "audit", "gpupool.vcf.gpu_pool_audit": {"design_file": DESIGN_FILE, "links": ["esxi", "vsphere"]}},
    ],
}]
TASKS = [t["name"] for t in PLAY[0]["tasks"]]


def core_results(sims, version):
    """{task: result} of the play at one version (run once), and the simulator's SOAP stats of it."""
    if version not in _RESULTS:
        sim = sims[version]
        sim.reset_stats()
        env = dict(sim.env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT="")
        run = run_playbook(PLAY, env=env)
        assert run.data is not None, run.stdout[-3000:] + run.stderr[-3000:]
        _RESULTS[version] = ({name: run.result(name) for name in TASKS}, sim.stats()["soap"])
    return _RESULTS[version]


def comparable(result):
    """A task result without what Ansible adds around the module's own result."""
    out = copy.deepcopy(result)
    for key in list(out):
        if key == "invocation" or key.startswith("_ansible"):
            del out[key]
    return out


@pytest.mark.parametrize("version", list(VERSIONS))
def test_core_paths(sims, version):
    api = VERSIONS[version][0]
    results, soap = core_results(sims, version)
    for name in TASKS:
        assert not results[name].get("failed"), (name, results[name].get("msg"))
    # every SOAP call of every module named the negotiated version
    assert soap["total"] > 0 and soap["versions"] == {api: soap["total"]}

    hosts = {h["name"]: h for h in results["host info"]["hosts"]}
    assert sorted(hosts) == ["esx-h100-01", "esx-h100-02", "esx-h100-03", "esx-h100-04"]
    assert hosts["esx-h100-01"]["gpu_count"] == 4 and "nvidia_h100-3-40c" in hosts["esx-h100-01"]["vgpu_profiles"]
    assert hosts["esx-h100-04"]["driver"]["version"] == "550.54.10"

    check = results["gpu config check"]
    assert check["changed"] is True
    assert check["diff"]["before"] != check["diff"]["after"]
    assert sims[version].host_state("esx-h100-01")["nvidia_options"] == ""

    created, rerun, deleted = (results[n] for n in ("vm class create", "vm class rerun", "vm class delete"))
    assert created["changed"] is True and created["api_form"] == "config_spec"
    assert rerun["changed"] is False and deleted["changed"] is True

    audit = results["audit"]
    assert audit["audited"] == ["esxi", "vsphere"]
    assert ("driver_off_design", "host esx-h100-04") in [(f["rule"], f["object"]) for f in audit["findings"]]


def test_same_results_at_both_versions(sims):
    old, new = (core_results(sims, version)[0] for version in VERSIONS)
    for name in TASKS:
        assert comparable(old[name]) == comparable(new[name]), name
    # the same calls too, only the version they named differs
    assert core_results(sims, "8.0.3")[1]["methods"] == core_results(sims, "9.0")[1]["methods"]


def test_simulator_own_soap_calls_neither_refused_nor_counted(sims):
    """vcsim's Supervisor listing logs in over SOAP with govmomi's client, which names 9.0.0.0."""
    import base64
    import json

    sim = sims["8.0.3"]
    sim.reset_stats()
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    base = "https://%s:%d" % (sim.host, sim.port)
    auth = base64.b64encode(("%s:%s" % (sim.user, sim.password)).encode()).decode()
    req = urllib.request.Request(base + "/api/session", method="POST", headers={"Authorization": "Basic " + auth})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as res:
        token = json.loads(res.read())
    req = urllib.request.Request(base + "/api/vcenter/namespace-management/clusters",
                                 headers={"vmware-api-session-id": token})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as res:
        assert sorted(c["cluster_name"] for c in json.loads(res.read())) == ["gpu-h100", "gpu-l40s"]
    stats = sim.stats()
    assert stats["soap"] == {"total": 0, "methods": {}, "versions": {}}
    assert stats["rest"]["total"] == 2
