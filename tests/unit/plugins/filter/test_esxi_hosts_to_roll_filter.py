"""esxi_hosts_to_roll: the role's plan per host, in the items the audit reports."""
from ansible_collections.gpupool.vcf.plugins.filter import esxi

FULL = "550.90.05-1OEM.800.1.0.20613240"


def host(name, version=FULL, **kw):
    rec = dict(name=name, gpu_count=2, connection_state="connected", errors=[], gpus=[dict(pci_id="0000:3b:00.0")],
               graphics=dict(default_type="shared_direct", assignment_policy="performance",
                             device_types={"0000:3b:00.0": "shared_direct"}),
               driver=dict(version=version.split("-")[0], full_version=version), nvidia_module_options="",
               vgpu_profiles=["nvidia_l40s-8c"], vgpu_vms=[])
    rec.update(kw)
    return rec


def test_hosts_with_their_plan_items():
    hosts = [host("a"), host("b", version="550.54.10-1OEM.800.1.0.20613240"),
             host("c", reboot_pending=["reboot pending on the host (staged software not running)"])]
    todo = esxi.esxi_hosts_to_roll(hosts, FULL, "shared_direct", "performance", {"policy": "best_effort"})
    assert sorted(todo) == ["b", "c"]
    assert [(i["field"], i["action"], i["after"]) for i in todo["b"]] == [("driver", "upgrade", FULL)]
    assert todo["c"][0]["reason"] == "reboot pending on the host (staged software not running)"
    # a change of _plan's one type, in its to_dict form (what crosses into Jinja)
    assert set(todo["b"][0]) == {"object", "field", "before", "after", "action", "reason"}
    assert todo["b"][0]["object"] == "host b"
    # empty role variables mean "leave it alone"
    assert esxi.esxi_hosts_to_roll([host("a", graphics=None)], FULL, "", "", {}) == {}


def test_a_target_the_plan_cannot_reach_is_a_refused_item():
    todo = esxi.esxi_hosts_to_roll([host("a")], "latest")
    assert [(i["field"], i["action"]) for i in todo["a"]] == [("driver", "refused")]
    assert "Invalid NVIDIA driver version" in todo["a"][0]["reason"]


def test_bad_settings_are_refused_items_for_the_per_host_module_to_report():
    todo = esxi.esxi_hosts_to_roll([host("a")], FULL, None, None, {"policy": "round_robin"})
    assert [(i["field"], i["action"]) for i in todo["a"]] == [("nvidia_module_options", "refused")]
    assert "unknown scheduler policy 'round_robin'" in todo["a"][0]["reason"]
