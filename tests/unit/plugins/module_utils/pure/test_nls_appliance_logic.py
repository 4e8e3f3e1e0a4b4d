"""The DLS appliance's pure logic: the OVF descriptor, the deploy and cluster plans, the appliance's state."""
import sys
from pathlib import Path

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _nls_appliance as nls

sys.path.insert(0, str(Path(__file__).resolve().parents[5] / "tests" / "sim" / "dls"))
import appliance_ova  # noqa: E402  pylint: disable=wrong-import-position

OVF = appliance_ova.descriptor(1024)


def test_parse_ovf_reads_the_declared_properties_networks_and_disks():
    ovf = nls.parse_ovf(OVF)
    assert ovf["name"] == appliance_ova.NAME and ovf["networks"] == [appliance_ova.NETWORK] and ovf["disks"] == 1
    assert ovf["files"] == ["%s-disk1.vmdk" % appliance_ova.NAME]
    assert sorted(ovf["properties"]) == sorted(appliance_ova.PROPERTIES)
    assert ovf["properties"]["appliance.netprefix0"] == dict(type="string", default="24", user_configurable=True,
                                                             label="appliance.netprefix0")
    assert ovf["properties"]["appliance.build"]["user_configurable"] is False


def test_qualified_keys_carry_class_and_instance():
    text = OVF.replace('<ProductSection ovf:required="true">', '<ProductSection ovf:class="vami" ovf:instance="dls">')
    assert "vami.appliance.ip0.dls" in nls.parse_ovf(text)["properties"]


@pytest.mark.parametrize("text, words", [
    ("not xml <", "not XML"),
    ('<Envelope xmlns="urn:other"/>', "not an OVF 1.x Envelope"),
    ('<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1"/>', "holds 0 virtual systems"),
])
def test_parse_ovf_refuses(text, words):
    with pytest.raises(nls.OvfError, match=words):
        nls.parse_ovf(text)


def test_property_errors():
    ovf = nls.parse_ovf(OVF)
    assert nls.property_errors(ovf, {"appliance.ip0": "10.0.0.1"}) == []
    errors = nls.property_errors(ovf, {"appliance.build": "x", "ip": "10.0.0.1"})
    assert errors[0] == "OVF property appliance.build is not user-configurable in the image"
    assert errors[1].startswith("OVF property ip is not declared by the image (it declares: appliance.dns,")
    assert "appliance.build" not in errors[1]


def test_owner_record_round_trip():
    value = nls.format_owner("deployed", "ab" * 32, "secondary")
    assert value == "state=deployed;ovf=abababababababab;role=secondary"
    assert nls.parse_owner(value) == dict(state="deployed", ovf="abababababababab", role="secondary")
    assert nls.parse_owner("") == {} and nls.parse_owner("set by hand") == {} and nls.parse_owner(None) == {}


NODES = nls.node_roles([dict(name="dls-1", properties={"ip": "10.0.0.1"}), dict(name="dls-2", properties={})])
OURS = dict(state="deployed", ovf="x", role="primary")


def test_node_roles():
    assert [n["role"] for n in NODES] == ["primary", "secondary"]


def test_deploy_plan_actions():
    vms = {"dls-1": dict(owner=OURS, power="poweredOn", properties={"ip": "10.0.0.1"}),
           "dls-2": dict(owner=dict(OURS, state="importing"), power="poweredOff", properties={})}
    plan = nls.deploy_plan(NODES, vms)
    assert plan == dict(actions=[("dls-1", "keep"), ("dls-2", "redeploy")], refused=[], drift=[])
    assert nls.deploy_plan(NODES, {})["actions"] == [("dls-1", "import"), ("dls-2", "import")]
    off = {"dls-1": dict(owner=OURS, power="poweredOff", properties={"ip": "10.0.0.1"})}
    assert nls.deploy_plan(NODES[:1], off)["actions"] == [("dls-1", "power_on")]
    assert nls.deploy_plan(NODES[:1], off, power_on=False)["actions"] == [("dls-1", "keep")]


def test_deploy_plan_refuses_a_vm_it_did_not_deploy_and_reports_drift_without_redeploying():
    plan = nls.deploy_plan(NODES, {"dls-2": dict(owner={}, power="poweredOn", properties={})})
    assert plan["refused"] == ["a VM named dls-2 exists that the collection did not deploy (no gpupool.vcf.nls-appliance "
                               "attribute): it is left alone; rename or remove it, or give another node name"]
    drift = nls.deploy_plan(NODES[:1], {"dls-1": dict(owner=OURS, power="poweredOn", properties={"ip": "10.0.0.9"})})
    assert drift["actions"] == [("dls-1", "keep")]
    assert drift["drift"][0].startswith("dls-1: OVF property ip is '10.0.0.9', the variables say '10.0.0.1'")


def test_cluster_plan_for_a_new_pair_is_one_set_of_adds():
    plan = nls.cluster_plan(["dls-1", "dls-2"], dict(rules={}, das={}, drs={}), "dls-ha")
    assert plan["rule"] == ("add", None, ["dls-1", "dls-2"])
    assert plan["das"] == [("add", "dls-1"), ("add", "dls-2")] and plan["drs"] == [("add", "dls-1"), ("add", "dls-2")]
    assert len(plan["changes"]) == 5


def test_cluster_plan_is_empty_when_everything_is_set():
    live = dict(rules={"dls-ha": dict(key=3, kind="anti-affinity", enabled=True, vms=["dls-2", "dls-1"])},
                das={"dls-1": "high", "dls-2": "high"},
                drs={"dls-1": dict(behavior="partiallyAutomated", enabled=True),
                     "dls-2": dict(behavior="partiallyAutomated", enabled=True)})
    plan = nls.cluster_plan(["dls-1", "dls-2"], live, "dls-ha")
    assert plan == dict(rule=None, das=[], drs=[], changes=[])


def test_cluster_plan_edits_what_drifted():
    live = dict(rules={"dls-ha": dict(key=3, kind="affinity", enabled=True, vms=["dls-1", "dls-2"])},
                das={"dls-1": "medium"}, drs={"dls-1": dict(behavior="manual", enabled=True),
                                              "dls-2": dict(behavior="partiallyAutomated", enabled=False)})
    plan = nls.cluster_plan(["dls-1", "dls-2"], live, "dls-ha")
    assert plan["rule"] == ("edit", 3, ["dls-1", "dls-2"])
    assert plan["das"] == [("edit", "dls-1"), ("add", "dls-2")]
    assert plan["drs"] == [("edit", "dls-1"), ("edit", "dls-2")]
    assert ("vm dls-1", "ha_restart_priority", "medium", "high") in plan["changes"]


def test_single_node_has_no_rule():
    plan = nls.cluster_plan(["dls-1"], dict(rules={}, das={}, drs={}), None)
    assert plan["rule"] is None and plan["das"] == [("add", "dls-1")]


@pytest.mark.parametrize("node, health", [
    ({"status": "ONLINE"}, ("healthy", "ONLINE")), ({"status": "OFFLINE"}, ("unhealthy", "OFFLINE")),
    ({"health": "healthy"}, ("healthy", "healthy")), ({"state": "DEGRADED"}, ("unhealthy", "DEGRADED")),
    ({}, ("unknown", None)), ({"status": ""}, ("unknown", None)),
])
def test_node_health(node, health):
    assert nls.node_health(node) == health


def instance(*statuses):
    nodes = [dict(node_id="n%d" % i, fqdn="dls-%d" % (i + 1), network_location="10.0.0.%d" % (i + 1),
                  role="PRIMARY" if i == 0 else "SECONDARY", **({"status": s} if s else {}))
             for i, s in enumerate(statuses)]
    return {"high_availability_config": {"config": {"nodeList": nodes}}}


def read(**kw):
    out = dict(where="dls:443", error=None, stage=None, transient=False, service_instance=instance("ONLINE", "ONLINE"),
               license_server="ls-1", leases=[])
    out.update(kw)
    return out


def test_appliance_ready():
    state = nls.appliance_state(read(), expect_nodes=2)
    assert state["ready"] and state["license_server_installed"] and state["problems"] == [] and state["next_step"] is None
    assert [n["health"] for n in state["nodes"]] == ["healthy", "healthy"]


def test_appliance_without_license_server_names_the_manual_step():
    state = nls.appliance_state(read(license_server=None, stage="license_server", error="answered 404 not found"))
    assert not state["ready"] and state["license_server_installed"] is False
    assert state["problems"] == ["no license server is installed on the service instance (answered 404 not found)"]
    assert state["next_step"] == nls.MANUAL_STEP
    assert "NVIDIA Licensing Portal" in nls.MANUAL_STEP and "no API" in nls.MANUAL_STEP


def test_appliance_unhealthy_node_and_missing_node():
    state = nls.appliance_state(read(service_instance=instance("ONLINE", "OFFLINE")), expect_nodes=2)
    assert state["problems"] == ["HA node dls-2 (SECONDARY, n1) is OFFLINE"] and not state["ready"]
    state = nls.appliance_state(read(service_instance=instance("ONLINE")), expect_nodes=2)
    assert state["problems"][0].startswith("the service instance lists 1 node(s), 2 expected (configure the HA")
    # a node without a health field is not judged
    assert nls.appliance_state(read(service_instance=instance(None, None)), expect_nodes=2)["ready"]


def test_appliance_not_answering():
    state = nls.appliance_state(read(error="cannot reach dls:443: connection refused", stage="login", transient=True,
                                     service_instance=None, license_server=None))
    assert not state["ready"] and state["license_server_installed"] is None
    assert state["problems"] == ["the appliance dls:443 does not answer at login: cannot reach dls:443: connection refused"]
    # a 503 at the license server is not "not installed"
    state = nls.appliance_state(read(error="answered 503", stage="license_server", transient=True, license_server=None))
    assert state["license_server_installed"] is None and "does not answer at license_server" in state["problems"][0]


def test_leases_not_readable_is_a_problem():
    state = nls.appliance_state(read(error="leases/all answered without a list of leases", stage="leases", leases=None))
    assert state["problems"] == ["the leases of license server ls-1 cannot be read: leases/all answered without a list "
                                 "of leases"]
