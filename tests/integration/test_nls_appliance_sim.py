"""The DLS appliance set up by the collection: nls_appliance_deploy on the vSphere simulator (a real OVF
import: CreateImportSpec, ImportVApp, disk upload through the NFC lease), nls_appliance_info and the
nls_appliance role against the DLS double (HA node list, node health, license server)."""
import json
import pathlib
import re
import ssl
import time

import pytest
from pyVim import connect
from pyVmomi import vim

import appliance_ova
import dls_double
from tests.lib.ansible_run import run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLEET = {
    "clusters": [{"name": "mgmt", "hosts": [{"prefix": "esx-mgmt-", "count": 3}]}],
    "vms": [{"name": "dls-foreign", "cluster": "mgmt"}],
}
DEPLOY = "gpupool.vcf.nls_appliance_deploy"
INFO = "gpupool.vcf.nls_appliance_info"
ROLE = "gpupool.vcf.nls_appliance : "
CHANGING = ("ImportVApp", "CreateVM_Task", "PowerOnVM_Task", "Destroy_Task", "ReconfigureComputeResource_Task",
            "SetField", "AddCustomFieldDef", "HttpNfcLeaseComplete")


@pytest.fixture(scope="module")
def ova(tmp_path_factory):
    return str(appliance_ova.build(tmp_path_factory.mktemp("image")))


def deploy_args(ova, *nodes, **kw):
    args = dict(ovf=ova, cluster="mgmt", datastore="LocalDS_0", network="VM Network",
                nodes=[{"name": n, "ovf_properties": {"appliance.ip0": "10.0.10.%d" % (21 + i),
                                                      "appliance.hostname": n}} for i, n in enumerate(nodes)])
    args.update(kw)
    return args


def changing(sim, before):
    after = sim.stats()["soap"]["methods"]
    return dict((m, after.get(m, 0) - before.get(m, 0)) for m in CHANGING if after.get(m, 0) != before.get(m, 0))


class Live:
    """The appliance VMs and the cluster settings as vCenter holds them (read with pyvmomi)."""

    def __init__(self, sim):
        ctx = ssl.create_default_context(cafile=sim.ca_file)
        self.si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
        self.content = self.si.RetrieveContent()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        connect.Disconnect(self.si)

    def objects(self, kind):
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
        try:
            return list(view.view)
        finally:
            view.Destroy()

    def vm(self, name):
        found = [v for v in self.objects(vim.VirtualMachine) if v.name == name]
        return found[0] if found else None

    def owner(self, vm):
        keys = dict((f.key, f.name) for f in self.content.customFieldsManager.field)
        return dict((keys[v.key], v.value) for v in vm.customValue).get("gpupool.vcf.nls-appliance")

    def set_owner(self, vm, value):
        key = [f.key for f in self.content.customFieldsManager.field if f.name == "gpupool.vcf.nls-appliance"][0]
        self.content.customFieldsManager.SetField(entity=vm, key=key, value=value)

    def cluster(self):
        cfg = [c for c in self.objects(vim.ClusterComputeResource) if c.name == "mgmt"][0].configurationEx
        # the simulator keeps the entries of a removed VM (vCenter drops them): named by moid here
        names = dict((v._moId, v.name) for v in self.objects(vim.VirtualMachine))
        rules = dict((r.name, (type(r).__name__.split(".")[-1], sorted(names.get(v._moId, v._moId) for v in r.vm)))
                     for r in cfg.rule)
        das = dict((names.get(e.key._moId, e.key._moId), e.dasSettings.restartPriority) for e in cfg.dasVmConfig)
        drs = dict((names.get(e.key._moId, e.key._moId), e.behavior) for e in cfg.drsVmConfig)
        return rules, das, drs


def test_bad_inputs_fail_before_any_request(vsphere, vsphere_env, ova):
    before = vsphere.stats()["soap"]["methods"]
    res, _run = run_module(DEPLOY, deploy_args(ova, "dls-1", nodes=[
        {"name": "dls-1", "ovf_properties": {"appliance.build": "x", "vami.ip0": "10.0.0.1"}}]), env=vsphere_env)
    assert res["failed"] and "appliance.build is not user-configurable" in res["msg"], res["msg"]
    assert "vami.ip0 is not declared by the image" in res["msg"] and "nothing was changed" in res["msg"]
    assert res["ovf"]["properties"]["appliance.ip0"]["user_configurable"] is True
    assert vsphere.stats()["soap"]["methods"] == before  # not even a login
    res, _run = run_module(DEPLOY, deploy_args("/nonexistent/dls.ova", "dls-1"), env=vsphere_env)
    assert res["failed"] and "is not an .ova or .ovf file" in res["msg"]
    # a VM of that name the collection did not deploy: refused after one read, nothing changed
    res, _run = run_module(DEPLOY, deploy_args(ova, "dls-foreign"), env=vsphere_env)
    assert res["failed"] and "a VM named dls-foreign exists that the collection did not deploy" in res["msg"]
    res, _run = run_module(DEPLOY, deploy_args(ova, "dls-1", datastore="nope"), env=vsphere_env)
    assert res["failed"] and res["msg"].endswith("datastore nope not found; datastores: LocalDS_0; nothing was changed")
    assert changing(vsphere, before) == {}


def test_single_node_check_deploy_rerun_drift_and_resume(vsphere, vsphere_env, ova):
    args = deploy_args(ova, "dls-solo")
    before = vsphere.stats()["soap"]["methods"]
    res, _run = run_module(DEPLOY, args, env=vsphere_env, check=True, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and [n["action"] for n in res["nodes"]] == ["import"]
    assert res["diff"]["before"]["nodes"] == {"dls-solo": "absent"}
    assert res["diff"]["after"]["nodes"] == {"dls-solo": "deployed, poweredOn"}
    assert sorted(c["field"] for c in res["cluster_changes"]) == ["drs_behavior", "ha_restart_priority"]
    # the simulator's cluster does not say HA is on: the priority is set, and the user told so
    assert any(w.startswith("vSphere HA is not enabled on cluster mgmt") for w in res["warnings"])
    assert changing(vsphere, before) == {}
    with Live(vsphere) as live:
        assert live.vm("dls-solo") is None

    res, _run = run_module(DEPLOY, args, env=vsphere_env)
    assert res["changed"] is True and res["nodes"][0]["action"] == "import" and res["uploaded_bytes"] > 0
    sent = changing(vsphere, before)
    assert sent["ImportVApp"] == 1 and sent["HttpNfcLeaseComplete"] == 1 and sent["ReconfigureComputeResource_Task"] == 1
    with Live(vsphere) as live:
        vm = live.vm("dls-solo")
        props = dict((p.id, p.value) for p in vm.config.vAppConfig.property)
        assert props["appliance.ip0"] == "10.0.10.21" and props["appliance.hostname"] == "dls-solo"
        assert vm.runtime.powerState == "poweredOn"
        assert live.owner(vm).startswith("state=deployed;ovf=") and live.owner(vm).endswith(";role=primary")
        assert res["nodes"][0]["moid"] == vm._moId
        rules, das, drs = live.cluster()
        assert das["dls-solo"] == "high" and drs["dls-solo"] == "partiallyAutomated" and rules == {}

    before = vsphere.stats()["soap"]["methods"]
    for check in (False, True):
        res, _run = run_module(DEPLOY, args, env=vsphere_env, check=check)
        assert res["changed"] is False and res["nodes"][0]["action"] == "keep" and res["cluster_changes"] == []
    assert changing(vsphere, before) == {}
    after = vsphere.stats()["soap"]["methods"]
    sent = dict((m, n - before.get(m, 0)) for m, n in after.items() if n != before.get(m, 0))
    assert sent.get("RetrievePropertiesEx") == 2, sent  # one retrieval per run, whatever the inventory

    # other OVF properties: reported, never redeployed
    res, _run = run_module(DEPLOY, dict(args, nodes=[{"name": "dls-solo", "ovf_properties": {"appliance.ip0": "10.9.9.9"}}]),
                           env=vsphere_env)
    assert res["changed"] is False and res["drift"][0].startswith("dls-solo: OVF property appliance.ip0 is '10.0.10.21'")
    assert any("appliance.ip0" in w for w in res.get("warnings", []))

    # an import that stopped half-way (marked importing) is ours: removed and imported again
    with Live(vsphere) as live:
        vm = live.vm("dls-solo")
        old = vm._moId
        live.set_owner(vm, "state=importing;ovf=x;role=primary")
    res, _run = run_module(DEPLOY, args, env=vsphere_env, check=True)
    assert res["changed"] is True and res["nodes"][0]["action"] == "redeploy"
    res, _run = run_module(DEPLOY, args, env=vsphere_env)
    assert res["changed"] is True and res["nodes"][0]["action"] == "redeploy", res.get("msg")
    with Live(vsphere) as live:
        vm = live.vm("dls-solo")
        assert vm._moId != old and live.owner(vm).startswith("state=deployed")
        assert live.cluster()[1]["dls-solo"] == "high"
    assert run_module(DEPLOY, args, env=vsphere_env)[0]["changed"] is False


def role_play(ova, dls, tmp_path, nodes, token=True, **extra):
    variables = dict(nls_appliance_ovf=ova, nls_appliance_cluster="mgmt", nls_appliance_datastore="LocalDS_0",
                     nls_appliance_network="VM Network", nls_appliance_nodes=nodes,
                     nls_appliance_api_host=dls.host, nls_appliance_api_port=dls.port,
                     nls_appliance_username=dls_double.USERNAME, nls_appliance_password=dls_double.PASSWORD,
                     nls_appliance_ca_file=dls.ca_file, nls_appliance_wait_seconds=20,
                     nls_appliance_token_path=str(tmp_path / "pool.tok"))
    variables.update(extra)
    tasks = [{"name": "token", "gpupool.vcf.dls_client_token": {
        "dls_host": dls.host, "port": dls.port, "username": dls_double.USERNAME, "password": dls_double.PASSWORD,
        "dest": str(tmp_path / "pool.tok"), "ca_file": dls.ca_file, "expiry_days": 20, "renew_before_days": 10}}]
    tasks = tasks if token else []
    tasks.append({"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.nls_appliance"}, "vars": variables})
    return [{"name": "appliance", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]


NODES = [{"name": "dls-a", "ovf_properties": {"appliance.ip0": "10.0.10.31"}},
         {"name": "dls-b", "ovf_properties": {"appliance.ip0": "10.0.10.32"}}]


def test_ha_pair_through_the_role_then_a_rerun_changes_nothing(vsphere, dls, ova, tmp_path):
    dls.add_node("dls-2.example.com", "10.20.30.41")
    dls.set_leases(2)
    before = vsphere.stats()["soap"]["methods"]
    run = run_playbook(role_play(ova, dls, tmp_path, NODES, nls_appliance_gpu_nodes=["gpu-1", "gpu-2", "gpu-3"],
                                 nls_appliance_renew_before_days=25),
                       env=vsphere.env, extra_vars={"nls_appliance_token_path": str(tmp_path / "pool.tok")})
    assert run.rc == 0, run.stdout[-3000:]
    deploy = run.result(ROLE + "Deploy the DLS appliance from its image")
    assert [(n["name"], n["role"], n["action"]) for n in deploy["nodes"]] == [
        ("dls-a", "primary", "import"), ("dls-b", "secondary", "import")]
    assert changing(vsphere, before)["ReconfigureComputeResource_Task"] == 1  # rule, HA and DRS: one reconfigure
    with Live(vsphere) as live:
        rules, das, drs = live.cluster()
        assert rules["dls-a-ha-pair"] == ("AntiAffinityRuleSpec", ["dls-a", "dls-b"])
        assert das["dls-a"] == das["dls-b"] == "high"
        assert drs["dls-a"] == drs["dls-b"] == "partiallyAutomated"
    state = run.result(ROLE + "Wait until the appliance answers, read its service instance, nodes, license server and leases")
    assert state["ready"] is True and state["license_server_installed"] is True and state["problems"] == []
    assert [(n["role"], n["health"]) for n in state["nodes"]] == [("PRIMARY", "healthy"), ("SECONDARY", "healthy")]
    # the watch: 2 leases for 3 GPU nodes, a token inside the 25-day margin - the audit's findings
    assert state["leases"] == 2 and state["token"]["state"] == "expiring" and state["token"]["days_left"] == 20
    assert sorted(f["rule"] for f in state["findings"]) == ["client_token_expiring", "leases_short"]
    report = run.result(ROLE + "Report the licensing watch (leases, client token)")["msg"]
    assert "2 lease(s)" in report and "dls-2.example.com healthy" in report and "client token expiring" in report

    before = vsphere.stats()["soap"]["methods"]
    run = run_playbook(role_play(ova, dls, tmp_path, NODES), env=vsphere.env)
    assert run.rc == 0, run.stdout[-3000:]
    assert run.result(ROLE + "Deploy the DLS appliance from its image")["changed"] is False
    assert changing(vsphere, before) == {}
    run = run_playbook(role_play(ova, dls, tmp_path, NODES), env=vsphere.env, check=True)
    assert run.rc == 0 and run.result(ROLE + "Deploy the DLS appliance from its image")["changed"] is False


def test_appliance_without_license_server_stops_with_the_manual_step(vsphere, dls, ova, tmp_path):
    dls.state.license_server_installed = False  # (no client token can be made either)
    run = run_playbook(role_play(ova, dls, tmp_path, NODES[:1], token=False), env=vsphere.env)
    assert run.rc != 0
    msg = run.result(ROLE + "Stop where the appliance is not ready, with the next step")["msg"]
    assert "no license server is installed on the service instance" in msg
    assert "NVIDIA Licensing Portal" in msg and "NVIDIA publishes no API for this step" in msg
    assert "Install License Server" in msg and "rerun once it is done" in msg
    state = run.result(ROLE + "Wait until the appliance answers, read its service instance, nodes, license server and leases")
    assert state["license_server_installed"] is False
    assert [f["rule"] for f in state["findings"]] == ["dls_license_server_missing", "client_token_missing"]
    # once installed by hand, a rerun passes and deploys nothing
    dls.state.license_server_installed = True
    run = run_playbook(role_play(ova, dls, tmp_path, NODES[:1]), env=vsphere.env)
    assert run.rc == 0 and run.result(ROLE + "Deploy the DLS appliance from its image")["changed"] is False


def test_unhealthy_ha_node_is_reported(vsphere, dls, ova, tmp_path):
    dls.add_node("dls-2.example.com", "10.20.30.41", status="OFFLINE")
    info = dict(dls_host=dls.host, port=dls.port, username=dls_double.USERNAME, password=dls_double.PASSWORD,
                ca_file=dls.ca_file, wait_seconds=0, expect_nodes=2)
    res, _run = run_module(INFO, info, check=True)
    assert res["ready"] is False and res["license_server_installed"] is True and res["changed"] is False
    assert res["problems"] == ["HA node dls-2.example.com (SECONDARY, %s) is OFFLINE"
                               % dls.state.service_instance["high_availability_config"]["config"]["nodeList"][1]["node_id"]]
    run = run_playbook(role_play(ova, dls, tmp_path, NODES, token=False), env=vsphere.env)
    assert run.rc != 0
    assert "is OFFLINE" in run.result(ROLE + "Stop where the appliance is not ready, with the next step")["msg"]
    # a single node where two are expected
    dls.state.service_instance["high_availability_config"]["config"]["nodeList"].pop()
    res, _run = run_module(INFO, info)
    assert res["problems"][0].startswith("the service instance lists 1 node(s), 2 expected")
    # health not required: the role reports and goes on
    dls.add_node("dls-2.example.com", "10.20.30.41", status="OFFLINE")
    run = run_playbook(role_play(ova, dls, tmp_path, NODES, token=False, nls_appliance_require_ready=False), env=vsphere.env)
    assert run.rc == 0 and "dls-2.example.com unhealthy" in run.result(
        ROLE + "Report the licensing watch (leases, client token)")["msg"]


def test_waits_until_the_appliance_answers_and_the_wait_is_bounded(dls):
    info = dict(dls_host=dls.host, port=dls.port, username=dls_double.USERNAME, password=dls_double.PASSWORD,
                ca_file=dls.ca_file, request_timeout=2)
    dls.down()
    started = time.monotonic()
    res, _run = run_module(INFO, dict(info, wait_seconds=3))
    assert res["answered"] is False and res["ready"] is False and res["license_server_installed"] is None
    assert "connection refused" in res["problems"][0]
    waited = int(re.search(r"still not answering after (\d+) s", res["problems"][0]).group(1))
    assert 3 <= waited <= 8, res["problems"]  # the bound (3 s) plus at most one round of the client's own retries
    assert time.monotonic() - started < 60
    dls.up()
    # an appliance still starting its services answers 503: waited out (two rounds of the client's own
    # three attempts, a pause between them), then read
    dls.fail_next(6, status=503, path="/auth/v1/login$")
    res, _run = run_module(INFO, dict(info, wait_seconds=60))
    assert res["answered"] is True and res["ready"] is True, json.dumps(res)[:2000]
    assert len(dls.state.faulted) == 6 and dls.state.count("POST", "/auth/v1/login") == 7
    assert res["waited_seconds"] >= 2
    # wrong credentials are not waited out
    res, _run = run_module(INFO, dict(info, password="wrong", wait_seconds=60))
    assert res["answered"] is False and "401" in res["problems"][0] and res["waited_seconds"] == 0


def test_failed_import_says_what_it_left_and_a_rerun_resumes(vsphere, vsphere_env, ova):
    args = deploy_args(ova, "dls-broken")
    vsphere.add_soap_fault("HttpNfcLeaseComplete", status=500)
    try:
        res, _run = run_module(DEPLOY, args, env=vsphere_env)
    finally:
        vsphere.clear_soap_faults()
    assert res["failed"] and res["msg"].startswith("Unable to import appliance node dls-broken from "), res["msg"]
    assert "done before the failure: dls-broken: VM created by the import, left marked state=importing; a rerun " \
           "resumes (a node left half-imported is removed and imported again)" in res["msg"]
    assert res["importing"] == "dls-broken" and res["done"] == []
    with Live(vsphere) as live:
        assert live.owner(live.vm("dls-broken")).startswith("state=importing")
    before = vsphere.stats()["soap"]["methods"]
    res, _run = run_module(DEPLOY, args, env=vsphere_env)
    assert res["changed"] is True and res["nodes"][0]["action"] == "redeploy", res.get("msg")
    assert changing(vsphere, before)["Destroy_Task"] == 1
    with Live(vsphere) as live:
        assert live.owner(live.vm("dls-broken")).startswith("state=deployed")


def test_role_in_check_mode_on_a_new_appliance_changes_nothing(vsphere, dls, ova, tmp_path):
    before = vsphere.stats()["soap"]["methods"]
    nodes = [{"name": "dls-new-1", "ovf_properties": {}}, {"name": "dls-new-2", "ovf_properties": {}}]
    run = run_playbook(role_play(ova, dls, tmp_path, nodes, token=False), env=vsphere.env, check=True, diff=True)
    assert run.rc == 0, run.stdout[-3000:]
    deploy = run.result(ROLE + "Deploy the DLS appliance from its image")
    assert deploy["changed"] is True and [n["action"] for n in deploy["nodes"]] == ["import", "import"]
    assert "in check mode a node that would be imported does not exist yet" in run.result(
        ROLE + "Say why the appliance is not checked")["msg"]
    assert changing(vsphere, before) == {} and dls.state.requests == []
    with Live(vsphere) as live:
        assert live.vm("dls-new-1") is None and live.vm("dls-new-2") is None


def test_the_playbook_takes_site_variables(vsphere, dls, ova, tmp_path):
    run = run_playbook(ROOT / "playbooks" / "nls_appliance.yml", env=vsphere.env, extra_vars={
        "nls_appliance_ovf": ova, "nls_appliance_cluster": "mgmt", "nls_appliance_datastore": "LocalDS_0",
        "nls_appliance_nodes": [{"name": "dls-pb", "ovf_properties": {"appliance.ip0": "10.0.10.41"}}],
        "gpupool_dls_host": dls.host, "gpupool_dls_port": dls.port, "gpupool_dls_username": dls_double.USERNAME,
        "gpupool_dls_password": dls_double.PASSWORD, "gpupool_dls_ca_file": dls.ca_file})
    assert run.rc == 0, run.stdout[-3000:]
    assert run.result(ROLE + "Deploy the DLS appliance from its image")["nodes"][0]["action"] == "import"
    state = run.result(ROLE + "Wait until the appliance answers, read its service instance, nodes, license server "
                              "and leases")
    assert state["ready"] is True and "token" not in state
    assert dls.state.count("POST", "/auth/v1/login") == 1
