# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ESXi host shell over SSH: the one way to run nvidia-smi on a host (host MIG mode has no
vSphere API). Runs the OpenSSH client of the controller, key authentication only (BatchMode):
the host's SSH service must be on and the key in the host's authorized keys."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import subprocess

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi


class ShellError(ClientError):
    """A command could not be run on the host, or it failed."""


def split_address(value, default_port):
    """("address", port) from "address", "address:port" or "[v6]:port"."""
    text = str(value).strip()
    m = re.match(r"^\[([^\]]+)\](?::(\d+))?$", text)
    if m:
        return m.group(1), int(m.group(2) or default_port)
    if text.count(":") == 1:
        host, port = text.split(":")
        if port.isdigit():
            return host, int(port)
    return text, int(default_port)


class EsxiShell:
    """Commands on ESXi hosts. ``options``: the module's ``ssh`` option (user, port, private_key_file,
    known_hosts_file, host_key_checking, addresses, timeout)."""

    def __init__(self, options, run=subprocess.run):
        self.o = dict(options or {})
        self._run = run

    def argv(self, host, command):
        o = self.o
        address, port = split_address((o.get("addresses") or {}).get(host, host), o.get("port") or 22)
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % int(o.get("timeout") or 30),
                "-o", "LogLevel=ERROR", "-p", str(port)]
        if not o.get("host_key_checking", True):
            argv += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
        elif o.get("known_hosts_file"):
            argv += ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=%s" % o["known_hosts_file"]]
        if o.get("private_key_file"):
            argv += ["-i", o["private_key_file"], "-o", "IdentitiesOnly=yes"]
        return argv + ["%s@%s" % (o.get("user") or "root", address), command]

    def run(self, host, command):
        """stdout of ``command`` on ``host``; :class:`ShellError` when SSH or the command fails."""
        try:
            res = self._run(self.argv(host, command), capture_output=True, text=True,
                            timeout=int(self.o.get("timeout") or 30) * 2, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ShellError("host %s: %s: %s" % (host, command, exc))
        if res.returncode != 0:
            detail = (res.stderr or res.stdout or "").strip().splitlines()
            why = "SSH failed" if res.returncode == 255 else "exit %d" % res.returncode
            raise ShellError("host %s: %s: %s%s" % (host, command, why, ": %s" % detail[-1] if detail else ""))
        return res.stdout

    def mig_modes(self, host):
        """The MIG mode of every GPU of the host (:func:`_esxi.parse_mig_query` rows)."""
        rows = _esxi.parse_mig_query(self.run(host, _esxi.mig_query_command()))
        if not rows:
            raise ShellError("host %s: nvidia-smi listed no GPU" % host)
        return rows

    def set_mig(self, host, enabled, indexes):
        """nvidia-smi -i <index> -mig 0|1 for each index; the output in words."""
        return [self.run(host, cmd).strip() for cmd in _esxi.mig_mode_commands(bool(enabled), list(indexes))]
