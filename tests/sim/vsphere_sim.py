"""Start the project's vSphere simulator (tests/sim/vsphere) from Python tests.

    from vsphere_sim import start, fleet_of
    with start(fleet_of(4)) as sim:
        sim.env["VMWARE_PORT"], sim.stats(), sim.host_state("esx-h100-01")

Needs the binary built by `make sim-build` (<repo>/.sim/bin/vspheresim).
A fleet's ``accounts`` add restricted users (README there, "Accounts and privileges");
``sim.env_as(user, password)`` is the connection of one of them.
Standard library plus PyYAML only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BINARY = REPO / ".sim" / "bin" / "vspheresim"

DEFAULT_DRIVER = "550.90.05-1OEM.800.1.0.20613240"


class SimulatorError(RuntimeError):
    """The simulator could not be started or an admin call failed."""


class VsphereSim:
    """A running simulator process; use start() to create one."""

    def __init__(self, proc: subprocess.Popen, workdir: tempfile.TemporaryDirectory, env: dict[str, str], url: str):
        self._proc = proc
        self._workdir = workdir
        self.env = env
        self.url = url
        self.host = env["VMWARE_HOST"]
        self.port = int(env["VMWARE_PORT"])
        self.user = env["VMWARE_USER"]
        self.password = env["VMWARE_PASSWORD"]
        self.ca_file = env["VMWARE_CA_FILE"]
        self._ssl = ssl.create_default_context(cafile=self.ca_file)

    # --- admin endpoints -------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"https://{self.host}:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=30) as res:
                return json.loads(res.read() or b"null")
        except urllib.error.HTTPError as err:
            raise SimulatorError(f"{method} {path}: {err.code} {err.read().decode(errors='replace')}") from None

    def stats(self) -> dict:
        """Request counts since start or the last reset: {"soap": {...}, "rest": {...}}."""
        return self._call("GET", "/_sim/stats")

    def reset_stats(self) -> None:
        self._call("POST", "/_sim/stats/reset")

    def host_state(self, name: str) -> dict:
        """JSON view of a host's GPU state (driver, graphics, module options, maintenance...)."""
        return self._call("GET", f"/_sim/hosts/{name}")

    def ssh_addresses(self) -> dict:
        """{GPU host name: "127.0.0.1:<port>"} of the hosts' SSH listeners (started with ssh_authorized_keys)."""
        return self._call("GET", "/_sim/ssh")

    def mig(self, name: str) -> list:
        """Per GPU of a host: {"index", "pci_bus_id", "current", "pending"} MIG mode (None: no MIG on the GPU model)."""
        return self._call("GET", f"/_sim/hosts/{name}/mig")["gpus"]

    def gpus(self, name: str) -> list:
        """Per GPU of a host: {"index", "pci_id", "mig_current", "mig_pending", "vgpu_mode" (as
        graphicsInfo shows it: multiInstanceGpu in MIG mode), "vgpu_mode_configured", "vms": [{"name",
        "profile"}]} (the vGPUs of powered-on VMs placed on it)."""
        return self.host_state(name)["gpus"]

    def set_gpu(self, host: str, index: int, mig: bool | None = None, vgpu_mode: str | None = None) -> dict:
        """Change one GPU's MIG mode (current and pending) and/or vGPU mode ("sameSize", "mixedSize")
        behind the collection's back (drift); refused (SimulatorError, 409) while a powered-on VM's
        vGPU sits on that GPU. Returns the host view."""
        body: dict[str, Any] = {}
        if mig is not None:
            body["mig"] = mig
        if vgpu_mode is not None:
            body["vgpu_mode"] = vgpu_mode
        return self._call("POST", f"/_sim/hosts/{host}/gpus/{index}", body)

    def ssh_service(self, name: str) -> str:
        """The host's TSM-SSH service: "running" or "stopped"."""
        return self.host_state(name)["ssh_service"]

    def inject_fault(self, host: str | None, op: str, message: str = "", times: int = 1, hang: bool = False,
                     vm: str | None = None) -> dict:
        """Make the next `times` calls of op fail with message, or hang (task stays running) until cleared.

        Host ops: install, reboot, reboot_hang, update_graphics, update_module_options, nvidia_smi,
        enter_maintenance, exit_maintenance. VM ops (pass vm=, host=None): power_on, power_off.
        """
        body: dict[str, Any] = {"op": op, "message": message, "times": times, "hang": hang}
        if host is not None:
            body["host"] = host
        if vm is not None:
            body["vm"] = vm
        return self._call("POST", "/_sim/faults", body)

    def clear_faults(self) -> None:
        """Drop host and VM faults: hung tasks go on, hosts held by reboot_hang come back."""
        self._call("DELETE", "/_sim/faults")

    def set_driver(self, host: str, version: str) -> dict:
        """Change a host's installed and running NVIDIA driver behind vCenter's back (drift)."""
        return self._call("POST", f"/_sim/hosts/{host}/driver", {"version": version})

    def reconnect_host(self, host: str) -> dict:
        """Bring back a host held notResponding by reboot_hang; returns its host view."""
        return self._call("POST", f"/_sim/hosts/{host}/reconnect")

    def fail_host(self, host: str) -> dict:
        """The host fails: notResponding, its powered-on VMs off, then restarted by vSphere HA on the
        cluster's other hosts in restart-priority order where their vGPUs fit. Returns the record:
        {"host", "cluster", "ha_enabled", "failed_at", "powered_off", "restarted": [{"vm", "priority",
        "host", "at", "seconds_after_failure"}], "stayed_off": [{"vm", "priority", "reason"}]}."""
        return self._call("POST", f"/_sim/hosts/{host}/fail")

    def recover_host(self, host: str) -> dict:
        """A failed host is connected again; HA retries the VMs that stayed off. Returns the record."""
        return self._call("POST", f"/_sim/hosts/{host}/recover")

    def ha_failures(self) -> list:
        """The host failures since start or the last stats reset (records as fail_host returns)."""
        return self.stats()["ha"]["failures"]

    def kill_sessions(self) -> dict:
        """End every SOAP and REST session: {"soap": n, "rest": m}."""
        return self._call("POST", "/_sim/sessions/kill")

    def outage(self, seconds: float, wait_started: bool = True) -> dict:
        """Refuse connections for `seconds` (sessions dropped, state kept).

        The answer comes before the outage starts; with wait_started the call returns
        once a connection is refused.
        """
        res = self._call("POST", "/_sim/outage", {"seconds": seconds})
        if wait_started:
            deadline = time.monotonic() + 5
            while self.serving() and time.monotonic() < deadline:
                time.sleep(0.01)
        return res

    def serving(self) -> bool:
        """Whether the simulator's port accepts connections."""
        try:
            socket.create_connection((self.host, self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def wait_serving(self, timeout: float = 30.0) -> None:
        """Wait until the port accepts connections again (after an outage)."""
        deadline = time.monotonic() + timeout
        while not self.serving():
            if time.monotonic() > deadline:
                raise SimulatorError(f"simulator not serving after {timeout} s")
            time.sleep(0.05)

    def add_rest_fault(self, path: str, status: int = 503, method: str = "*", delay_seconds: float = 0,
                       times: int = 1, reset: bool = False, body: str = "", forward: bool = False) -> dict:
        """Answer the next `times` REST requests matching method and the path regexp (0: until cleared)
        with status, after delay_seconds, or reset the connection; status=0 with a delay: slow answer.
        forward: vCenter serves (carries out) the request first, then status or reset replaces its answer."""
        rule = _fault_rule(method, status, reset, delay_seconds, times, forward, path=path)
        if body:
            rule["body"] = body
        return self._call("POST", "/_sim/rest_faults", rule)

    def rest_faults(self) -> list:
        return self._call("GET", "/_sim/rest_faults")

    def clear_rest_faults(self) -> None:
        self._call("DELETE", "/_sim/rest_faults")

    def add_soap_fault(self, method: str, status: int = 0, reset: bool = False, delay_seconds: float = 0,
                       times: int = 1, forward: bool = False) -> dict:
        """Answer the next `times` SOAP calls of method ("*": any) with an HTTP status, a reset
        connection, or (only delay_seconds) a slow answer; times 0: until cleared. forward: vCenter
        serves (carries out) the call first, then the status or reset replaces its answer."""
        return self._call("POST", "/_sim/soap_faults", _fault_rule(method, status, reset, delay_seconds, times, forward))

    def soap_faults(self) -> list:
        return self._call("GET", "/_sim/soap_faults")

    def clear_soap_faults(self) -> None:
        self._call("DELETE", "/_sim/soap_faults")

    def env_as(self, user: str, password: str) -> dict[str, str]:
        """The connection variables (``env``) for another account of the fleet (its ``accounts`` key)."""
        return dict(self.env, VMWARE_USER=user, VMWARE_PASSWORD=password)

    # --- lifecycle -------------------------------------------------------
    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._workdir.cleanup()

    def __enter__(self) -> "VsphereSim":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _fault_rule(method: str, status: int, reset: bool, delay_seconds: float, times: int, forward: bool,
                **match: str) -> dict:
    """The rule body of /_sim/rest_faults and /_sim/soap_faults: a reset wins over a status; ``match``
    (the REST path) is added as given."""
    rule: dict[str, Any] = dict({"method": method}, **match, delay_seconds=delay_seconds, times=times)
    if forward:
        rule["forward"] = True
    if reset:
        rule["reset"] = True
    elif status:
        rule["status"] = status
    return rule


def start(fleet: dict | str | os.PathLike, port: int = 0, reboot_seconds: float = 1.0,
          username: str = "administrator@vsphere.local", password: str | None = None,
          timeout: float = 60.0, api_version: str | None = None,
          ssh_authorized_keys: str | os.PathLike | None = None) -> VsphereSim:
    """Start the simulator with a fleet (a dict, or the path of a fleet YAML file).

    ssh_authorized_keys: an authorized_keys file; every GPU host then answers nvidia-smi over SSH
    on a port of its own (VsphereSim.ssh_addresses()), where host MIG mode is read and set.

    api_version: the vSphere API the simulator presents, "8.0.3" (default), "9.0" or "9.1"
    (About, /sdk/vimServiceVersions.xml and the SOAP versions it accepts).
    """
    if not BINARY.exists():
        raise SimulatorError(f"simulator binary {BINARY} is missing: run make sim-build")
    workdir = tempfile.TemporaryDirectory(prefix="vspheresim-")
    wd = Path(workdir.name)
    if isinstance(fleet, dict):
        fleet_file = wd / "fleet.yml"
        fleet_file.write_text(yaml.safe_dump(fleet, sort_keys=False))
    else:
        fleet_file = Path(fleet)
    env_file = wd / "vsphere.env"
    cmd = [str(BINARY), "-fleet", str(fleet_file), "-listen", f"127.0.0.1:{port}", "-state-dir", str(wd),
           "-env-file", str(env_file), "-username", username, "-reboot-seconds", str(reboot_seconds)]
    if password:
        cmd += ["-password", password]
    if api_version:
        cmd += ["-api-version", api_version]
    if ssh_authorized_keys:
        cmd += ["-ssh-authorized-keys", str(ssh_authorized_keys)]
    log = open(wd / "vsphere.log", "wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
    log.close()

    ready: list[str] = []

    def read_ready() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            text = line.decode(errors="replace").strip()
            if text.startswith("READY "):
                ready.append(text.split(" ", 1)[1])
                return

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(timeout)
    if not ready:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        err = (wd / "vsphere.log").read_text(errors="replace")[-2000:]
        workdir.cleanup()
        raise SimulatorError(f"vSphere simulator did not become ready: {err}")
    env = {}
    for line in env_file.read_text().splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            env[key] = value
    return VsphereSim(proc, workdir, env, ready[0])


MIG_BACKED = re.compile(r"-\d+-\d+c(me)?$", re.IGNORECASE)


def start_from_capture(capture: str | os.PathLike, **kwargs) -> VsphereSim:
    """Start the simulator in the shape of a capture (docs/capture.md): its fleet built from the capture's
    vSphere section by capture_playback; ``kwargs`` as for start()."""
    import capture_playback

    return start(capture_playback.fleet_from_capture(capture_playback.load(capture)), **kwargs)


def mig_backed(profile: str) -> bool:
    """Whether a vGPU profile is MIG-backed (nvidia_h100-3-40c, grid_a100d-1-10cme), by its name."""
    return bool(MIG_BACKED.search(profile or ""))


def fleet_of(n_hosts: int, model: str = "H100-80GB", gpus: int = 4, vms_per_host: int = 0,
             vgpu: str | None = None, driver: str = DEFAULT_DRIVER, cluster: str = "gpu",
             supervisor: bool = True, prefix: str = "esx-") -> dict:
    """A one-cluster fleet of n_hosts identical GPU hosts, for benchmarks.

    vms_per_host powered-on VMs are spread over the cluster, each with one vGPU
    (default: the model's smallest MIG profile, or its smallest C profile when
    the model has no MIG). With such VMs of a MIG-backed profile every GPU of the
    hosts starts in MIG mode (``mig: all``), where the simulator can place them.
    """
    if vgpu is None:
        vgpu = {
            "A100-80GB": "grid_a100d-1-10c",
            "H100-80GB": "nvidia_h100-1-10c",
            "H200-141GB": "nvidia_h200x-1-18c",
            "L40S": "nvidia_l40s-4c",
        }.get(model, "")
    fleet: dict = {
        "clusters": [{
            "name": cluster,
            "supervisor": supervisor,
            "hosts": [{"prefix": prefix, "count": n_hosts, "gpu": {"model": model, "count": gpus},
                       "driver_version": driver}],
        }],
        "vms": [],
    }
    if vms_per_host > 0 and n_hosts > 0:
        if mig_backed(vgpu):
            fleet["clusters"][0]["hosts"][0]["mig"] = "all"
        fleet["vms"].append({"name": "vm", "cluster": cluster, "count": n_hosts * vms_per_host,
                             "vgpu": [vgpu] if vgpu else []})
    return fleet
