"""gpu_pool_capture against the vSphere simulator (the example fleet): the record holds what the readers got
(hosts with graphics, module options, driver packages, per-GPU MIG and vGPU mode; VM classes; namespaces),
carries its format version, is written with mode 0600, holds no address of the vCenter and no secret, keeps the
names unless redact_names, sends no write to the platform, and an existing file is refused without force. The
shipped capture of the example platform after site.yml plays back (tests/sim/capture_loader.py) into a simulator
and rig that answer as the original did."""
import json
import pathlib

from tests.integration.test_gpu_pool_discover import changing
from tests.lib.ansible_run import run_module


def capture(env, dest, **args):
    return run_module("gpupool.vcf.gpu_pool_capture", dict(dest=str(dest), **args), env=env)[0]


def test_capture_records_the_readers_answers_redacted(vsphere, vsphere_env, tmp_path):
    dest = tmp_path / "capture.json"
    before = vsphere.stats()
    res = capture(vsphere_env, dest, redact_hosts=["dls01.example"])
    assert not res.get("failed"), res.get("msg")
    assert changing(before, vsphere.stats()) == {}
    assert res["changed"] is True and oct(dest.stat().st_mode & 0o777) == "0o600"
    text = dest.read_text()
    record = json.loads(text)
    assert record["format_version"] == 1 and record["names_redacted"] is False
    assert res["sections"] == ["vsphere"] and res["counts"]["hosts"] == len(record["vsphere"]["hosts"]) > 0
    hosts = record["vsphere"]["hosts"]
    gpu_hosts = [h for h in hosts if h["gpu_count"]]
    assert gpu_hosts and all(h["name"] for h in gpu_hosts)  # the names are the test data
    assert all("graphics" in h and "gpus" in h for h in gpu_hosts)
    assert any((h.get("driver") or {}).get("packages") for h in gpu_hosts)
    assert all("mig" in g for h in gpu_hosts for g in h["gpus"])
    assert set(record["vsphere"]) >= {"drs", "vm_classes", "namespaces", "storage_policies", "cluster_names"}
    # the vCenter's address is nowhere; nor a password
    assert vsphere.host not in text and vsphere_env["VMWARE_PASSWORD"] not in text

    # check mode predicts, writes nothing; an existing file is refused without force
    again = capture(vsphere_env, dest)
    assert again.get("failed") and "it exists; give force: true" in again["msg"] and dest.read_text() == text
    forced = capture(vsphere_env, dest, force=True)
    assert not forced.get("failed"), forced.get("msg")
    assert forced["changed"] is False and dest.read_text() == text


def test_redact_names_maps_every_name_to_a_stable_pseudonym(vsphere, vsphere_env, tmp_path):
    plain = capture(vsphere_env, tmp_path / "plain.json")
    assert not plain.get("failed"), plain.get("msg")
    names = [h["name"] for h in json.loads((tmp_path / "plain.json").read_text())["vsphere"]["hosts"]]
    one = capture(vsphere_env, tmp_path / "one.json", redact_names=True, salt="s")
    two = capture(vsphere_env, tmp_path / "two.json", redact_names=True, salt="s")
    assert not one.get("failed") and not two.get("failed"), (one.get("msg"), two.get("msg"))
    text = (tmp_path / "one.json").read_text()
    assert text == (tmp_path / "two.json").read_text()
    assert json.loads(text)["names_redacted"] is True
    assert not [n for n in names if '"%s"' % n in text]


def _without_ids(value):
    """A gpu_host_info answer without what a fresh simulator numbers anew (managed object ids, VM uuids)."""
    if isinstance(value, dict):
        return dict((k, _without_ids(v)) for k, v in value.items() if k not in ("moid", "uuid"))
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _differences(a, b, path=""):
    """The paths where two answers differ (a readable failure instead of two long dumps)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in _differences(a.get(k), b.get(k), "%s.%s" % (path, k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, "%s[%d]" % (path, i))]
    return [] if a == b else ["%s: %r != %r" % (path, a, b)]


FOLDER = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "captures"
SHIPPED = FOLDER / "example.json"
EXPECTED = FOLDER / "example.expected.json"


def _overrides_by_name(record):
    """The record with its DRS overrides keyed by VM name (a played-back simulator numbers its VMs anew)."""
    import capture_playback
    names = capture_playback.vm_names(record)
    for state in (record["vsphere"].get("drs") or {}).values():
        state["overrides"] = dict((names.get(k, k), v) for k, v in (state.get("overrides") or {}).items())
    return record


def test_the_shipped_capture_played_back_answers_as_the_original_platform(tmp_path):
    """The capture of the example platform after site.yml (tests/tools/capture_example.py), loaded into a fresh
    simulator and rig: gpu_host_info's inventory and the design gpu_pool_discover finds (vSphere, Supervisor and
    guest) are the ones the original platform gave; a capture of the played-back platform is the shipped one (so
    the shipped capture is current: a reader that grows makes them differ, and the tool regenerates both)."""
    import capture_loader
    import capture_playback
    from tests.lib.paths import gpu_operator_chart, gpu_operator_chart_missing
    from tests.tools.capture_example import answers, capture as capture_all

    shipped = capture_playback.load(SHIPPED)
    assert sorted(k for k in shipped if k not in ("format_version", "names_redacted")) == ["guest", "vks", "vsphere"]
    assert shipped["vsphere"]["vm_classes"] and shipped["vsphere"]["namespaces"] and shipped["guest"]["cluster_policy"]
    assert capture_playback.unplayed(shipped) == []
    assert capture_playback.unplayed(shipped, cluster_policy_served=False) == [
        "the ClusterPolicy (the rig has no ClusterPolicy CRD: install the GPU Operator's CRDs)"]
    expected = json.loads(EXPECTED.read_text())
    chart = gpu_operator_chart()
    assert chart is not None, gpu_operator_chart_missing()
    with capture_loader.played(SHIPPED, crds=[chart / "crds" / "nvidia.com_clusterpolicies.yaml"]) as (sim, rig):
        got = answers(dict(sim.env), rig.kubeconfig, tmp_path)
        again = capture_all(dict(sim.env), rig.kubeconfig, tmp_path / "again.json")
    assert got["links_not_read"] == {} and again["links_not_read"] == {}
    assert _differences(_without_ids(got["inventory"]), _without_ids(expected["inventory"])) == []
    assert got["design"] == expected["design"]
    assert got["design"]["guest"]["driver"] and any(p.get("node_pool", {}).get("vks_cluster")
                                                    for p in got["design"]["pools"])
    recaptured = _overrides_by_name(capture_playback.load(tmp_path / "again.json"))
    assert _differences(_without_ids(recaptured), _without_ids(_overrides_by_name(shipped))) == []
