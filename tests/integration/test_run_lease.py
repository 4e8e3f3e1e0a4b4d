"""One run per pool at a time (vSphere simulator): the run lease in the custom attribute gpupool.vcf.run-lease
of each GPU cluster.

The module: a second run is refused naming the holder while the first holds the lease; check mode takes none
and names the holder (site.yml's too); the lease of a killed run is waited for until it expires, then taken over; a run
releases only its own. site.yml: refused before any change while another run holds the pool; a run and a
no-op rerun, each releasing the lease at its end, the rerun changed=0 on every play host (the lease is
bookkeeping), with the figures of what the lease costs that no-op run.
"""
import datetime
import json
import pathlib
import ssl

import pytest
from pyVim import connect
from pyVmomi import vim

from tests.lib.ansible_run import run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"
DESIGN = ROOT / "examples" / "design.yml"
FIELD = "gpupool.vcf.run-lease"
M = "gpupool.vcf.gpu_pool_lease"
CLUSTERS = ["gpu-h100", "gpu-l40s"]
NEW = "550.90.05-1OEM.800.1.0.20613240"
# the module calls' ttl: a tenth of it (8640 s, the window in which the holder's rerun writes nothing) is longer than
# any run of this file can last (each call is bounded by the runner's timeout), so whether a lease is renewed is
# decided by the records the test writes, never by how fast the machine runs the calls
TTL = 86400

# the example design's two GPU clusters, two hosts each (a roll keeps the GPUs its pools need), on the design's driver
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True, "hosts": [
            {"prefix": "esx-h100-", "count": 2, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW}]},
        {"name": "gpu-l40s", "hosts": [
            {"prefix": "esx-l40s-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW}]},
    ],
}


def stamp(seconds_from_now):
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Records:
    """The clusters' lease records, read and written as an administrator (or another run) would."""

    def __init__(self, sim):
        ctx = ssl.create_default_context(cafile=sim.ca_file)
        self.si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
        self.content = self.si.RetrieveContent()

    def close(self):
        connect.Disconnect(self.si)

    def cluster(self, name):
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [vim.ClusterComputeResource], True)
        try:
            return [c for c in view.view if c.name == name][0]
        finally:
            view.DestroyView()

    def key(self, create=False):
        keys = [f.key for f in self.content.customFieldsManager.field or [] if f.name == FIELD]
        if not keys and create:
            return self.content.customFieldsManager.AddCustomFieldDef(name=FIELD, moType=vim.ClusterComputeResource).key
        return keys[0] if keys else None

    def read(self, name):
        """The cluster's lease as a dict, None when there is none."""
        key = self.key()
        for value in self.cluster(name).customValue or []:
            if value.key == key and value.value:
                return json.loads(value.value)
        return None

    def write(self, name, holder, start, expiry):
        text = json.dumps({"holder": holder, "start": start, "expiry": expiry}, sort_keys=True, separators=(",", ":"))
        self.content.customFieldsManager.SetField(entity=self.cluster(name), key=self.key(create=True), value=text)

    def clear(self, name):
        if self.key() is not None:
            self.content.customFieldsManager.SetField(entity=self.cluster(name), key=self.key(), value="")


@pytest.fixture(scope="module")
def records(vsphere):
    out = Records(vsphere)
    try:
        yield out
    finally:
        out.close()


def lease(env, holder, check=False, **args):
    res, _run = run_module(M, dict(dict(clusters=CLUSTERS, holder=holder, ttl=TTL), **args), env=env, check=check)
    return res


def test_two_runs_check_mode_a_killed_runs_lease_and_release(vsphere_env, records):
    first = lease(vsphere_env, "run-a")
    assert not first.get("failed"), first
    assert [(x["cluster"], x["action"]) for x in first["leases"]] == [("gpu-h100", "take"), ("gpu-l40s", "take")]
    held = records.read("gpu-h100")
    assert held["holder"] == "run-a" and records.read("gpu-l40s")["holder"] == "run-a"

    # a rerun of the holder within the first tenth of the ttl leaves its lease as it is: not changed, no write
    predicted = lease(vsphere_env, "run-a", check=True)
    kept = lease(vsphere_env, "run-a")
    assert not kept.get("failed") and kept["changed"] is False and predicted["changed"] is False, kept
    assert [x["action"] for x in kept["leases"]] == ["none", "none"] == [x["action"] for x in predicted["leases"]]
    assert kept["requests"]["writes"] == 0 and records.read("gpu-h100") == held

    # with less than 90 % of the ttl left (half of it, written here) the holder's rerun renews that lease alone:
    # one SetField, the start kept, a new expiry a whole ttl from now
    records.write("gpu-h100", "run-a", held["start"], stamp(TTL // 2))
    halfway = records.read("gpu-h100")
    predicted = lease(vsphere_env, "run-a", check=True)
    renewed = lease(vsphere_env, "run-a")
    assert not renewed.get("failed") and renewed["changed"] is True and predicted["changed"] is True, renewed
    assert [x["action"] for x in renewed["leases"]] == ["renew", "none"] == [x["action"] for x in predicted["leases"]]
    assert predicted["requests"]["writes"] == 0 and renewed["requests"]["writes"] == 1
    held = records.read("gpu-h100")
    assert held["holder"] == "run-a" and held["start"] == halfway["start"] and held["expiry"] > halfway["expiry"], held
    assert held["expiry"] == renewed["leases"][0]["after"]["expiry"] >= stamp(TTL * 9 // 10)

    second = lease(vsphere_env, "run-b")
    assert second.get("failed") and "leased by run run-a" in second["msg"], second
    assert "since %s, until %s" % (held["start"], held["expiry"]) in second["msg"] and "nothing was changed" in second["msg"]
    assert records.read("gpu-h100") == held

    # check mode takes none: it reads and names the holder
    checked = lease(vsphere_env, "run-b", check=True)
    assert not checked.get("failed") and checked["held_by_others"]["gpu-h100"]["holder"] == "run-a", checked
    assert checked["requests"]["writes"] == 0 and records.read("gpu-h100") == held

    # a killed run's lease, expiring in a few seconds: the rerun waits for it, then takes it over
    for name in CLUSTERS:
        records.write(name, "ops@ctl:4242-dead", stamp(-3600), stamp(4))
    taken = lease(vsphere_env, "run-b", wait=60)
    assert not taken.get("failed"), taken
    assert [x["action"] for x in taken["leases"]] == ["take_over", "take_over"]
    assert taken["requests"]["waited"] >= 1 and records.read("gpu-l40s")["holder"] == "run-b"

    # a run releases only its own
    refused = lease(vsphere_env, "run-a", state="released")
    assert refused.get("failed") and "only its own" in refused["msg"]
    released = lease(vsphere_env, "run-b", state="released")
    assert not released.get("failed") and records.read("gpu-h100") is None and records.read("gpu-l40s") is None


def site(env, **extra):
    extra_vars = dict({"gpupool_design_file": str(DESIGN), "gpupool_lease_ttl": TTL}, **extra)
    return run_playbook(SITE, env=env, extra_vars=extra_vars)


def lease_tasks(run):
    """(task name, seconds) of every lease task of the run."""
    out = []
    for play in (run.data or {}).get("plays", []):
        for task in play.get("tasks", []):
            if "lease" in task["task"]["name"].lower():
                d = task["task"].get("duration") or {}
                seconds = 0.0
                if d.get("start") and d.get("end"):
                    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
                    seconds = (datetime.datetime.strptime(d["end"], fmt) - datetime.datetime.strptime(d["start"], fmt)).total_seconds()
                out.append((task["task"]["name"], seconds, task.get("hosts", {})))
    return out


def test_site_refused_while_held_then_run_and_noop_rerun(vsphere, vsphere_env, records):
    for name in CLUSTERS:
        records.write(name, "awx-job-77", stamp(-60), stamp(3600))
    refused = site(vsphere_env)
    assert refused.rc != 0
    stops = [r for name, r in refused.tasks if name == "Stop before any change" and r.get("failed")]
    assert len(stops) == 1 and "leased by run awx-job-77" in stops[0]["msg"] and "No link was run" in stops[0]["msg"], \
        refused.stdout[-3000:]
    assert not any(name.startswith("Roll the cluster") for name, _r in refused.tasks)
    assert records.read("gpu-h100")["holder"] == "awx-job-77"

    # --check is not refused and takes no lease: it says who holds the pool
    checked = run_playbook(SITE, env=vsphere_env, check=True, extra_vars={"gpupool_design_file": str(DESIGN)})
    assert checked.rc == 0, checked.stdout[-4000:]
    said = checked.result("Who holds the pool (check mode takes no lease)").get("msg", "")
    assert "GPU cluster gpu-h100 is leased by run awx-job-77" in said and "would be refused" in said, said
    assert records.read("gpu-h100")["holder"] == "awx-job-77" and records.read("gpu-l40s")["holder"] == "awx-job-77"

    for name in CLUSTERS:
        records.clear(name)
    first = site(vsphere_env, gpupool_lease_holder="run-site")
    assert first.rc == 0, first.stdout[-4000:]
    assert records.read("gpu-h100") is None and records.read("gpu-l40s") is None  # released at the end

    vsphere.reset_stats()
    again = site(vsphere_env, gpupool_lease_holder="run-site")
    assert again.rc == 0, again.stdout[-4000:]
    per_host = (again.data or {}).get("stats", {})
    assert per_host and all(s.get("changed", 0) == 0 for s in per_host.values()), per_host
    assert records.read("gpu-h100") is None and records.read("gpu-l40s") is None
    # the call at each cluster's roll, minutes after the take (well within a tenth of the ttl), finds at least 90 %
    # of it left and writes nothing
    renews = [r for name, r in again.tasks if name.startswith("Renew the run lease of the cluster for its roll")]
    assert sorted(r["leases"][0]["cluster"] for r in renews) == CLUSTERS, renews
    assert all([x["action"] for x in r["leases"]] == ["none"] and r["requests"]["writes"] == 0 for r in renews), renews
    # what the lease costs the no-op run: its tasks and their seconds, and the SetField calls (2 per cluster: take
    # and release, none at the rolls)
    costs = lease_tasks(again)
    calls = vsphere.stats()["soap"]["methods"]
    print("lease on a no-op run: %d tasks, %.1f s; SetField %s, RetrievePropertiesEx %s, Login %s of %d SOAP calls"
          % (len(costs), sum(s for _n, s, _h in costs), calls.get("SetField"), calls.get("RetrievePropertiesEx"),
             calls.get("Login"), sum(calls.values())))
    assert calls.get("SetField") == 2 * len(CLUSTERS), calls  # no other SetField on a no-op run
