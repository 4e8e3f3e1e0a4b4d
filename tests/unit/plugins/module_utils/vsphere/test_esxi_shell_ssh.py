"""The ESXi host shell over SSH: batch, key-only command lines, and failures that name the host and the command."""
import subprocess

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_shell import EsxiShell, ShellError, split_address


def test_ssh_command_line_is_batch_and_key_only():
    shell = EsxiShell(dict(user="root", port=22, private_key_file="/k", host_key_checking=False,
                           addresses={"esx-1": "10.0.0.5:2222"}, timeout=5))
    argv = shell.argv("esx-1", "nvidia-smi -mig 1")
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[-2:] == ["root@10.0.0.5", "nvidia-smi -mig 1"]
    assert argv[argv.index("-p") + 1] == "2222" and "StrictHostKeyChecking=no" in argv and "/k" in argv
    strict = EsxiShell({}).argv("esx-2", "x")
    assert "StrictHostKeyChecking=no" not in strict and strict[-2] == "root@esx-2" and strict[strict.index("-p") + 1] == "22"
    assert split_address("[fe80::1]:2200", 22) == ("fe80::1", 2200)
    assert split_address("fe80::1", 22) == ("fe80::1", 22)


def test_ssh_failures_name_the_host_and_the_command():
    def run(argv, **_):
        return subprocess.CompletedProcess(argv, 1, "", "Unable to enable MIG Mode: Unknown Error\n")
    with pytest.raises(ShellError, match="host esx-1: nvidia-smi -i 0 -mig 1: exit 1: Unable to enable MIG Mode"):
        EsxiShell({}, run=run).set_mig("esx-1", True, [0])

    def unreachable(argv, **_):
        return subprocess.CompletedProcess(argv, 255, "", "ssh: connect to host esx-1 port 22: Connection refused\n")
    with pytest.raises(ShellError, match="SSH failed: ssh: connect to host esx-1 port 22: Connection refused"):
        EsxiShell({}, run=unreachable).mig_modes("esx-1")
