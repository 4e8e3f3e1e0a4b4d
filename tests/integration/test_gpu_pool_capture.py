"""gpu_pool_capture against the vSphere simulator (the example fleet): the record holds what the readers got
(hosts with graphics, module options, driver packages, per-GPU MIG and vGPU mode; VM classes; namespaces),
carries its format version, is written with mode 0600, holds no address of the vCenter and no secret, keeps the
names unless redact_names, sends no write to the platform, and an existing file is refused without force."""
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


SHIPPED = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "example.json"


def test_the_shipped_capture_is_current_and_played_back_gives_the_same_inventory_and_design(vsphere, vsphere_env,
                                                                                            tmp_path):
    import capture_playback
    import vsphere_sim

    # the shipped capture is what a capture of the example fleet gives today (else: tests/tools/capture_example.py)
    dest = tmp_path / "capture.json"
    res = capture(vsphere_env, dest)
    assert not res.get("failed"), res.get("msg")
    shipped = capture_playback.load(SHIPPED)
    assert _differences(_without_ids(capture_playback.load(dest)), _without_ids(shipped)) == []
    # the example fleet is one the simulator plays back in full
    assert capture_playback.unplayed(shipped) == []
    taken = run_module("gpupool.vcf.gpu_host_info", {}, env=vsphere_env)[0]
    assert not taken.get("failed"), taken.get("msg")
    for side in ("taken", "played"):
        (tmp_path / side).mkdir()
    found = run_module("gpupool.vcf.gpu_pool_discover", dict(dest=str(tmp_path / "taken" / "d.yml")), env=vsphere_env)[0]
    played = vsphere_sim.start_from_capture(SHIPPED)
    try:
        again = run_module("gpupool.vcf.gpu_host_info", {}, env=dict(played.env))[0]
        refound = run_module("gpupool.vcf.gpu_pool_discover", dict(dest=str(tmp_path / "played" / "d.yml")),
                             env=dict(played.env))[0]
    finally:
        played.stop()
    assert not again.get("failed"), again.get("msg")
    assert _differences(_without_ids(again["hosts"]), _without_ids(taken["hosts"])) == []
    assert _differences(_without_ids(again["clusters"]), _without_ids(taken["clusters"])) == []

    # the same discovered design (or the same refusal, on a fleet with no VM classes yet)
    def same(result):
        return result.get("failed"), (result.get("msg") or "").replace("/played/", "/taken/"), result.get("design")
    assert same(refound) == same(found)
