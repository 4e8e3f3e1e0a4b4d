"""The guest audit of the ClusterPolicy against the gpu_operator role's inputs derive() gives: the
vGPU guest driver (image, version, pull Secret), a design without one, and the MIG strategy."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
SECRET = "licensing-config-0123456789"


def live_policy(derived):
    """The ClusterPolicy spec a converge with derive()'s inputs leaves (the role's repair patch)."""
    op, _policy = _audit_guest.guest_inputs(derived)
    spec = objs.cluster_policy_spec(dict(op, gpu_operator_licensing_secret_name=SECRET))
    return {"exists": True, "spec": spec}


def audit(derived, cp):
    return [(f["rule"], f["object"]) for f in _audit_guest.audit_guest(derived, cluster_policy=cp)], _audit_guest.audit_guest(
        derived, cluster_policy=cp)


@pytest.fixture
def derived():
    return derive(copy.deepcopy(EXAMPLE))


def test_converged_cluster_policy_is_clean_and_holds_the_guest_driver(derived):
    cp = live_policy(derived)
    driver = EXAMPLE["guest"]["driver"]
    assert cp["spec"]["driver"]["repository"] == driver["repository"]
    assert cp["spec"]["driver"]["image"] == driver["image"]
    assert cp["spec"]["driver"]["version"] == driver["version"]
    assert cp["spec"]["driver"]["imagePullSecrets"] == [driver["pull_secret"]]
    assert audit(derived, cp)[0] == []


@pytest.mark.parametrize("path,value,text", [
    (("driver", "version"), "535.183.06", "driver.version 535.183.06 (design 550.90.07)"),
    (("driver", "repository"), "nvcr.io/nvidia", "driver.repository nvcr.io/nvidia (design registry.example.com/nvaie)"),
    (("driver", "image"), "driver", "driver.image driver (design vgpu-guest-driver)"),
    (("driver", "imagePullSecrets"), [], "driver.imagePullSecrets [] (design ['nvaie-registry'])"),
])
def test_guest_driver_drift_is_cluster_policy_changed(derived, path, value, text):
    cp = live_policy(derived)
    cp["spec"][path[0]][path[1]] = value
    found, out = audit(derived, cp)
    assert found == [("cluster_policy_changed", "cluster_policy cluster-policy")]
    assert text in out[0]["message"]


def test_mig_strategy_drift_is_its_own_finding_and_names_the_leave(derived):
    cp = live_policy(derived)
    cp["spec"]["mig"]["strategy"] = "none"
    found, out = audit(derived, cp)
    assert found == [("mig_strategy_changed", "cluster_policy cluster-policy")]
    assert "mig.strategy none (design single)" in out[0]["message"]
    assert "guest.allow_mig_strategy_change" in out[0]["fix"]
    allowed = copy.deepcopy(EXAMPLE)
    allowed["guest"]["allow_mig_strategy_change"] = True
    out = _audit_guest.audit_guest(derive(allowed), cluster_policy=cp)
    assert [f["rule"] for f in out] == ["mig_strategy_changed"] and "allows the change" in out[0]["message"]
    assert out[0]["fix"] == _audit_guest.RULES["mig_strategy_changed"][3]  # the table's, whether allowed or not


def test_design_without_guest_driver_is_guest_driver_missing():
    design = copy.deepcopy(EXAMPLE)
    del design["guest"]["driver"]
    derived = derive(design)
    # what the chart left: its data-center driver
    cp = {"exists": True, "spec": {"driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver",
                                              "version": "570.124.06", "licensingConfig": {
                                                  "nlsEnabled": True, "secretName": SECRET},
                                              # the role's upgrade policy (judged in test_driver_upgrade)
                                              "upgradePolicy": objs.cluster_policy_spec(_audit_guest.guest_inputs(
                                                  derived)[0])["driver"]["upgradePolicy"]},
                                   "mig": {"strategy": "single"},
                                   "dcgmExporter": objs.cluster_policy_spec(_audit_guest.guest_inputs(derived)[0])["dcgmExporter"],
                                   "devicePlugin": {"config": {"name": "gpupool-time-slicing", "default": "default"}}}}
    found, out = audit(derived, cp)
    assert found == [("guest_driver_missing", "design guest.driver")]
    assert "Add guest.driver to the design" in out[0]["message"] and "does not load in a vGPU VM" in out[0]["message"]
    # not read: not judged
    assert _audit_guest.audit_guest(derived) == []


def test_dcgm_metrics_config_as_the_role_writes_it(derived):
    op, _policy = _audit_guest.guest_inputs(derived)
    cm = objs.dcgm_metrics_config_map(op)
    live = {"exists": True, "data": dict(cm["data"])}
    assert _audit_guest.audit_guest(derived, dcgm_metrics_config=live) == []
    # the same fields and types with other comments and help texts: as written
    text = "\n".join("%s, %s, other words" % ft for ft in objs.dcgm_metrics_fields(cm["data"]["dcgm-metrics.csv"]))
    assert _audit_guest.audit_guest(derived, dcgm_metrics_config={"exists": True, "data": {"dcgm-metrics.csv": text}}) == []
    dropped = "\n".join(line for line in cm["data"]["dcgm-metrics.csv"].splitlines()
                        if "PROF_SM_ACTIVE" not in line) + "\nDCGM_FI_DEV_POWER_USAGE, gauge, power\n"
    out = _audit_guest.audit_guest(derived, dcgm_metrics_config={"exists": True, "data": {"dcgm-metrics.csv": dropped}})
    assert [(f["rule"], f["object"], f["severity"]) for f in out] == [
        ("dcgm_metrics_config_changed", "config_map gpu-operator/gpupool-dcgm-metrics", "warning")]
    assert "missing DCGM_FI_PROF_SM_ACTIVE" in out[0]["message"] and "DCGM_FI_DEV_POWER_USAGE" in out[0]["message"]
    out = _audit_guest.audit_guest(derived, dcgm_metrics_config={"exists": False, "data": {}})
    assert [f["rule"] for f in out] == ["dcgm_metrics_config_missing"]


def test_dcgm_exporter_cluster_policy_drift(derived):
    cp = live_policy(derived)
    cp["spec"]["dcgmExporter"]["enablePodLabels"] = False
    cp["spec"]["dcgmExporter"].pop("config")
    found, out = audit(derived, cp)
    assert found == [("cluster_policy_changed", "cluster_policy cluster-policy")]
    assert "dcgmExporter.enablePodLabels False (design True)" in out[0]["message"]
    assert "dcgmExporter.config.name unset (design gpupool-dcgm-metrics)" in out[0]["message"]
