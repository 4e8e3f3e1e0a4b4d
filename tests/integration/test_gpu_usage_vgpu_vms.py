"""gpu_usage's vGPU VM-hours (VMs outside Kubernetes) against the vSphere simulator: vSphere
Namespaces as resource pools under the cluster's Namespaces pool, VMs moved into them, powered
off and on by the test at times it notes; the VM-hours per namespace and profile worked out by
hand, the module within 1 %, with one PropertyCollector retrieval and one event collector.

Period: [T, T + PERIOD]. By hand (seconds on within the period):

    team-a  train-01   2 x nvidia_h100-80c    on all along                  2 x PERIOD
    team-a  serve-01   1 x nvidia_h100-3-40c  powered off at T + OFF_AT     OFF_AT
    team-b  viz-01     1 x nvidia_l40s-24c    powered on at T + ON_AT       PERIOD - ON_AT
    team-b  parked-01  1 x nvidia_h100-80c    off all along                 0 (a row with 0 h)
    (none)  lab-01     1 x nvidia_l40s-8c     on, off at T + OFF_AT, on again after the period
    team-b  tkc-node-1 1 x nvidia_h100-80c    on all along, named by vm_exclude: left out
"""
import pathlib
import ssl
import time

import pytest
import yaml
from pyVim import connect
from pyVmomi import vim

from tests.lib import browser
from tests.lib.ansible_run import run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRIVER = "550.90.05-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True, "hosts": [
            # serve-01's 3g.40gb instance on the third card of esx-h100-01 (train-01 takes the first two)
            {"name": "esx-h100-01", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": DRIVER,
             "mig": [2]},
            {"name": "esx-h100-02", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": DRIVER}]},
        {"name": "gpu-l40s", "hosts": [
            {"prefix": "esx-l40s-", "count": 1, "gpu": {"model": "L40S", "count": 2}, "driver_version": DRIVER}]},
    ],
    "vms": [
        {"name": "train-01", "host": "esx-h100-01", "vgpu": ["nvidia_h100-80c"] * 2},
        {"name": "serve-01", "host": "esx-h100-01", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "parked-01", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"], "power": "off"},
        {"name": "tkc-node-1", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"]},
        {"name": "viz-01", "host": "esx-l40s-01", "vgpu": ["nvidia_l40s-24c"], "power": "off"},
        {"name": "lab-01", "host": "esx-l40s-01", "vgpu": ["nvidia_l40s-8c"]},
        {"name": "plain-01", "host": "esx-l40s-01"},
    ],
}
PERIOD = 30.0
OFF_AT = 8.0
ON_AT = 14.0
NAMESPACES = {"team-a": ("gpu-h100", ["train-01", "serve-01"]),
              "team-b": ("gpu-h100", ["parked-01", "tkc-node-1"])}
CARD_HOUR = {"H100-80GB": 4.0, "L40S": 1.2}
PROFILE_HOUR = {"nvidia_h100-80c": 5.0}


class Vc(object):
    def __init__(self, sim):
        ctx = ssl.create_default_context(cafile=sim.ca_file)
        self.si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
        content = self.si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder,
                                                       [vim.VirtualMachine, vim.ClusterComputeResource], True)
        self.objs = dict((o.name, o) for o in view.view)
        view.DestroyView()

    def wait(self, task):
        while task.info.state not in ("success", "error"):
            time.sleep(0.02)
        assert task.info.state == "success", task.info.error

    def power(self, name, on):
        """Power a VM on or off; returns the midpoint of the call (the event's time is inside it)."""
        before = time.time()
        vm = self.objs[name]
        self.wait(vm.PowerOnVM_Task() if on else vm.PowerOffVM_Task())
        return (before + time.time()) / 2

    def namespaces(self):
        """The Supervisor's layout: <cluster root pool>/Namespaces/<namespace>, VMs moved in."""
        tops = {}
        for ns, (cluster, vms) in NAMESPACES.items():
            root = self.objs[cluster].resourcePool
            if cluster not in tops:
                tops[cluster] = root.CreateResourcePool("Namespaces", spec())
            self.move(tops[cluster].CreateResourcePool(ns, spec()), vms)
        # viz-01 sits in team-b of the L40S cluster's own Namespaces pool
        l40s = self.objs["gpu-l40s"].resourcePool.CreateResourcePool("Namespaces", spec())
        self.move(l40s.CreateResourcePool("team-b", spec()), ["viz-01"])

    def move(self, pool, vms):
        # the simulator has no MoveIntoResourcePool; a relocation to the pool does the same
        for name in vms:
            self.wait(self.objs[name].RelocateVM_Task(vim.vm.RelocateSpec(pool=pool)))

    def close(self):
        connect.Disconnect(self.si)


def spec():
    alloc = vim.ResourceAllocationInfo(limit=-1, reservation=0, expandableReservation=True,
                                       shares=vim.SharesInfo(level="normal", shares=0))
    return vim.ResourceConfigSpec(cpuAllocation=alloc, memoryAllocation=alloc)


@pytest.fixture(scope="module")
def period(vsphere):
    """Lays out the namespaces, then powers VMs at known times; returns (start, end, times)."""
    vc = Vc(vsphere)
    try:
        vc.namespaces()
        start = time.time() + 1.0
        time.sleep(start + OFF_AT - time.time())
        off = vc.power("serve-01", False)
        lab_off = vc.power("lab-01", False)
        time.sleep(max(0, start + ON_AT - time.time()))
        on = vc.power("viz-01", True)
        end = start + PERIOD
        time.sleep(max(0, end - time.time()) + 1.0)
        vc.power("lab-01", True)  # after the period: not counted
        return start, end, dict(off=off, lab_off=lab_off, on=on)
    finally:
        vc.close()


@pytest.fixture(scope="module")
def design_file(tmp_path_factory):
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    d["chargeback"] = {"currency": "EUR", "card_hour": CARD_HOUR, "profile_hour": PROFILE_HOUR}
    path = tmp_path_factory.mktemp("vgpu-vms") / "design.yml"
    path.write_text(yaml.safe_dump(d))
    return path


def usage_args(sim, start, end, **more):
    args = dict(vcenter_hostname=sim.host, vcenter_port=sim.port, vcenter_username=sim.user,
                vcenter_password=sim.password, vcenter_ca_file=sim.ca_file,
                start="%.3f" % start, end="%.3f" % end, step="1s", vm_exclude=["tkc-node-*"])
    args.update(more)
    return args


@pytest.fixture(scope="module")
def result(vsphere, period, design_file, tmp_path_factory):
    start, end = period[:2]
    out = tmp_path_factory.mktemp("vm-report")
    before = vsphere.stats()["soap"]["methods"]
    res = run_module("gpupool.vcf.gpu_usage", usage_args(
        vsphere, start, end, design_file=str(design_file), json_path=str(out / "u.json"),
        csv_path=str(out / "u.csv"), html_path=str(out / "u.html")))[0]
    after = vsphere.stats()["soap"]["methods"]
    sent = dict((m, after.get(m, 0) - before.get(m, 0)) for m in after if after.get(m, 0) != before.get(m, 0))
    assert not res.get("failed"), res.get("msg")
    return res, sent, out


def test_vm_hours_match_the_hand_count(period, result):
    start, end, t = period
    res = result[0]
    assert res["vms_read"] is True
    rows = dict(((r["namespace"], r["profile"]), r) for r in res["vm_rows"])
    hand = {  # vGPU-seconds
        ("team-a", "nvidia_h100-80c"): 2 * PERIOD,
        ("team-a", "nvidia_h100-3-40c"): t["off"] - start,
        ("team-b", "nvidia_l40s-24c"): end - t["on"],
        ("team-b", "nvidia_h100-80c"): 0.0,
        ("(none)", "nvidia_l40s-8c"): t["lab_off"] - start,
    }
    assert sorted(rows) == sorted(hand)
    for key, seconds in hand.items():
        got = rows[key]["vgpu_hours"] * 3600
        if seconds == 0:
            assert got == 0, key
        else:
            assert got == pytest.approx(seconds, rel=0.01), (key, got, seconds)
    # the hand count against the test's planned times, too: the power calls took place as planned
    assert (t["off"] - start) == pytest.approx(OFF_AT, rel=0.05) and (end - t["on"]) == pytest.approx(PERIOD - ON_AT, rel=0.05)
    assert res["vms_left_out"] == ["tkc-node-1"]
    assert dict((r["name"], r["namespace"]) for r in res["vgpu_vms"]) == {
        "train-01": "team-a", "serve-01": "team-a", "parked-01": "team-b", "viz-01": "team-b", "lab-01": "(none)"}
    assert rows[("team-a", "nvidia_h100-80c")]["vms"] == 1
    # prices: a set profile_hour wins; 3-40c is half an H100; 24c is half an L40S, 8c a sixth
    price = {"nvidia_h100-80c": 5.0, "nvidia_h100-3-40c": 2.0, "nvidia_l40s-24c": 0.6, "nvidia_l40s-8c": 0.2}
    for key, row in rows.items():
        assert row["unit_price"] == pytest.approx(price[key[1]]), key
    cost = sum(s / 3600.0 * price[k[1]] for k, s in hand.items())
    assert res["vm_cost"] == pytest.approx(cost, rel=0.01) and res["total_cost"] == pytest.approx(cost, rel=0.01)
    assert res["vgpu_vm_hours"] == pytest.approx(sum(hand.values()) / 3600.0, rel=0.01)
    ns = dict((r["namespace"], r["vgpu_hours"]) for r in res["vm_by_namespace"])
    assert ns["team-a"] == pytest.approx((2 * PERIOD + t["off"] - start) / 3600.0, rel=0.01)
    print("vGPU VMs: module %.6f vGPU-hours, by hand %.6f" % (res["vgpu_vm_hours"], sum(hand.values()) / 3600.0))


def test_one_retrieval_and_one_event_collector(result):
    sent = result[1]
    assert sent.get("RetrievePropertiesEx") == 1 and "RetrieveProperties" not in sent, sent
    assert sent.get("CreateCollectorForEvents") == 1 and sent.get("DestroyCollector") == 1, sent
    assert sent.get("ReadNextEvents") == 1, sent
    assert not [m for m in sent if m.endswith("_Task")], sent


def test_files_carry_the_vm_rows(result):
    res, out = result[0], result[2]
    csv_lines = (out / "u.csv").read_text().splitlines()
    vm_lines = [line for line in csv_lines if line.endswith(",vm")]
    assert len(vm_lines) == len(res["vm_rows"]) == 5 and all(",vgpu-vm," in line for line in vm_lines)
    page = (out / "u.html").read_text()
    assert 'id="chart-vms"' in page and page.count('data-segment=') == 4  # the 0-hour row draws no bar
    # the page the module wrote, in headless Chromium: the VM chart drew a bar per row with hours
    shown = browser.open_reports([out / "u.html"])[str(out / "u.html")]
    chart = browser.assert_bars_drawn(shown, "chart-vms",
                                      [(r["namespace"], r["profile"], r["vgpu_hours"]) for r in res["vm_rows"]])
    assert len(chart["bars"]) == 4
    browser.assert_pixels(shown, chart)


def test_without_prometheus_or_vcenter_fails_before_reading(vsphere, tmp_path, monkeypatch):
    monkeypatch.delenv("PROMETHEUS_URL", raising=False)
    res = run_module("gpupool.vcf.gpu_usage", dict(start="now-1h", json_path=str(tmp_path / "x.json")))[0]
    assert res["failed"] and "give prometheus_url" in res["msg"] and not (tmp_path / "x.json").exists()


def test_wrong_password_is_a_clear_failure(vsphere, tmp_path):
    now = time.time()
    res = run_module("gpupool.vcf.gpu_usage", usage_args(vsphere, now - 60, now, vcenter_password="wrong",
                                                         json_path=str(tmp_path / "x.json")))[0]
    assert res["failed"] and res["msg"].startswith("Unable to connect to vCenter %s: " % vsphere.host), res["msg"]
    assert not (tmp_path / "x.json").exists()


def test_playbook_with_vcenter_only(vsphere, period, tmp_path, monkeypatch):
    monkeypatch.delenv("PROMETHEUS_URL", raising=False)
    start, end = period[:2]
    res = run_playbook(ROOT / "playbooks" / "chargeback.yml", env=dict(vsphere.env), extra_vars=dict(
        chargeback_vcenter_hostname=vsphere.host, chargeback_start="%.3f" % start, chargeback_end="%.3f" % end,
        chargeback_step="1s", chargeback_output_dir=str(tmp_path), chargeback_name="vms",
        chargeback_vm_exclude=["tkc-node-*"]))
    assert res.rc == 0, res.stdout[-3000:]
    usage = res.result("Count GPU-hours from Prometheus and price them")
    assert usage["rows"] == [] and len(usage["vm_rows"]) == 5 and usage["vms_left_out"] == ["tkc-node-1"]
    shown = res.result("Show GPU-hours and cost per tenant")["msg"]
    assert shown[1].startswith("vGPU VMs outside Kubernetes: %.2f vGPU-hours" % usage["vgpu_vm_hours"]), shown
    assert "team-a nvidia_h100-80c %s" % round(2 * PERIOD / 3600.0, 3) in shown, shown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vms.csv", "vms.html", "vms.json"]


def test_playbook_shows_the_reserved_but_idle_slots(vsphere, period, tmp_path, monkeypatch):
    """team-a (the example's team-search) reserves 2 training VMs (2 x nvidia_h100-80c here) and 1 inference VM
    (nvidia_h100-3-40c) in zone-1: at the period's end train-01 (2 x 80c) is on in team-a and serve-01 is off,
    so 1 of 2 and 0 of 1 are used. Prices by hand: an idle training slot 2 x 5.0 EUR (profile_hour), an idle
    inference slot 4.0 x 1/2 (card_hour of the H100, two 3g.40gb a card) = 2.0 EUR an hour."""
    monkeypatch.delenv("PROMETHEUS_URL", raising=False)
    start, end = period[:2]
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    d["chargeback"] = {"currency": "EUR", "card_hour": CARD_HOUR, "profile_hour": PROFILE_HOUR}
    [p for p in d["pools"] if p["name"] == "training"][0]["gpus_per_node"] = 2
    search = [t for t in d["tenants"] if t["name"] == "team-search"][0]
    search.update(namespace="team-a", gpu_quota={"inference": 4, "training": 4}, vm_reservations=[
        {"pool": "training", "zone": "zone-1", "count": 2}, {"pool": "inference", "zone": "zone-1", "count": 1}])
    design = tmp_path / "design.yml"
    design.write_text(yaml.safe_dump(d))
    res = run_playbook(ROOT / "playbooks" / "chargeback.yml", env=dict(vsphere.env), extra_vars=dict(
        chargeback_vcenter_hostname=vsphere.host, chargeback_start="%.3f" % start, chargeback_end="%.3f" % end,
        chargeback_step="1s", chargeback_output_dir=str(tmp_path), chargeback_name="idle",
        chargeback_vm_exclude=["tkc-node-*"], chargeback_design_file=str(design)))
    assert res.rc == 0, res.stdout[-3000:]
    usage = res.result("Count GPU-hours from Prometheus and price them")
    assert [(r["tenant"], r["vm_class"], r["zone"], r["reserved"], r["used"], r["idle"], r["idle_hour_cost"])
            for r in usage["reserved_idle"]] == [("team-a", "gpu-inference", "zone-1", 1, 0, 1, 2.0),
                                                 ("team-a", "gpu-training", "zone-1", 2, 1, 1, 10.0)]
    shown = res.result("Show GPU-hours and cost per tenant")["msg"]
    assert shown[-3:] == ["Reserved VM class slots, idle of reserved (tenant class zone):",
                          "team-a gpu-inference zone-1: 1 of 1, 2.00 EUR an hour",
                          "team-a gpu-training zone-1: 1 of 2, 10.00 EUR an hour"], shown
