# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The redaction of a capture: secrets, addresses, the vCenter's and DLS's host names, PEM blocks,
bearer tokens, kubeconfig data, Secret data and last-applied annotations go; the names of hosts and
objects stay unless pseudonyms are asked for, and then they are stable."""

import json

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capture as cap

PEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2x\nAbCdEf==\n-----END CERTIFICATE-----"
KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"


def test_ipv4_and_ipv6_addresses_go_in_any_text():
    assert cap.redact_text("host at 10.1.2.3 and 192.168.0.0/24") == "host at <redacted-ip> and <redacted-ip>"
    assert cap.redact_text("peer fe80::1%vmk0 or 2001:db8:0:1:2:3:4:5") == "peer <redacted-ip> or <redacted-ip>"


def test_versions_pci_addresses_and_times_stay():
    for kept in ("550.54.15-1OEM.800.1.0.20613240", "0000:3b:00.0", "8.0.3", "12:30:00", "nvidia.com/gpu",
                 "esx-h100-01.lab.example", "H100-80GB", "nvidia_h100xm-1g.10gb"):
        assert cap.redact_text(kept) == kept


def test_url_hosts_go_with_their_credentials():
    out = cap.redact_text("https://admin:pw@vc01.corp.example:443/sdk and http://[fd00::5]/x")
    assert "vc01" not in out and "pw" not in out and "fd00" not in out
    assert out == "https://<redacted-host>:443/sdk and http://<redacted-host>/x"


def test_given_host_names_go_as_whole_words_only():
    hosts = ("vc01.corp.example", "dls01")
    out = cap.redact_text("vCenter vc01.corp.example, license server dls01; dls012 is another", hosts)
    assert out == "vCenter <redacted-host>, license server <redacted-host>; dls012 is another"
    assert cap.redact_text("VC01.CORP.EXAMPLE", hosts) == "<redacted-host>"


def test_pem_blocks_go_also_when_cut_short():
    assert cap.redact_text("ca:\n%s\nend" % PEM) == "ca:\n<redacted>\nend"
    assert cap.redact_text("x " + KEY.split("\n-----END", maxsplit=1)[0]) == "x <redacted>"


def test_bearer_tokens_go():
    assert cap.redact_text("Authorization: Bearer eyJhbGciOi.J9x-y_z") == "Authorization: Bearer <redacted>"
    assert cap.redact_text("basic YWRtaW46cHc=") == "basic <redacted>"


def test_secret_keys_go_whatever_they_hold():
    rec = {"password": "s3cret", "vsphere_password": "x", "nls": {"client-key-data": "QUJD", "token": "t"},
           "ssl_thumbprint": "AA:BB", "empty_token": "", "name": "gpu-h100"}
    out = cap.redact(rec)
    assert out == {"password": "<redacted>", "vsphere_password": "<redacted>",
                   "nls": {"client-key-data": "<redacted>", "token": "<redacted>"},
                   "ssl_thumbprint": "<redacted>", "empty_token": "", "name": "gpu-h100"}


def test_kubeconfig_data_goes():
    kubeconfig = {"clusters": [{"name": "sv", "cluster": {"server": "https://10.0.0.9:6443",
                                                          "certificate-authority-data": "LS0tLS1CRUdJTg=="}}],
                  "users": [{"name": "admin", "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}]}
    out = cap.redact(kubeconfig)
    cluster = out["clusters"][0]["cluster"]
    assert cluster == {"server": "https://<redacted-host>:6443", "certificate-authority-data": "<redacted>"}
    assert out["users"][0]["user"] == {"client-certificate-data": "<redacted>", "client-key-data": "<redacted>"}
    assert out["clusters"][0]["name"] == "sv"


def test_secret_data_goes_key_names_stay():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nls-token"},
              "data": {"client_configuration_token.tok": "ZXlK"}, "stringData": {"note": "plain"}}
    out = cap.redact(secret)
    assert out["data"] == {"client_configuration_token.tok": "<redacted>"}
    assert out["stringData"] == {"note": "<redacted>"}
    assert out["metadata"]["name"] == "nls-token"
    # a ConfigMap's data is test data, kept
    cm = {"kind": "ConfigMap", "data": {"config.yaml": "sharing: {timeSlicing: {}}"}}
    assert cap.redact(cm) == cm


def test_last_applied_annotation_goes_other_annotations_stay():
    meta = {"annotations": {cap.LAST_APPLIED: json.dumps({"data": {"password": "x"}}), "owner": "gpupool.vcf"}}
    assert cap.redact({"metadata": meta})["metadata"]["annotations"] == {cap.LAST_APPLIED: "<redacted>", "owner": "gpupool.vcf"}


def test_names_stay_by_default_and_the_record_is_a_copy():
    rec = {"hosts": [{"name": "esx-01", "cluster": "gpu-h100", "gpus": [{"pci": "0000:3b:00.0", "mig": True}]}]}
    out = cap.redact(rec)
    assert out == rec and out is not rec and out["hosts"] is not rec["hosts"]


def test_pseudonyms_are_stable_salted_and_cover_values_and_keys():
    names = cap.pseudonyms(["esx-01", "gpu-h100", ""])
    assert set(names) == {"esx-01", "gpu-h100"}
    assert names == cap.pseudonyms(["gpu-h100", "esx-01"])
    assert cap.pseudonym("esx-01", "salt") != cap.pseudonym("esx-01")
    rec = {"hosts": [{"name": "esx-01", "cluster": "gpu-h100", "model": "H100-80GB"}], "drs": {"gpu-h100": {"enabled": True}}}
    out = cap.redact(rec, names=names)
    assert out["hosts"][0] == {"name": names["esx-01"], "cluster": names["gpu-h100"], "model": "H100-80GB"}
    assert out["drs"] == {names["gpu-h100"]: {"enabled": True}}
    assert "esx-01" not in json.dumps(out) and "gpu-h100" not in json.dumps(out)


def test_leaks_names_what_is_left_and_a_redacted_record_has_none():
    rec = {"a": "10.0.0.1", "b": [PEM], "c": {"vc01": "ok"}, "d": "Bearer abc", "e": "fine"}
    assert sorted(cap.leaks(rec, hosts=("vc01",))) == sorted(["10.0.0.1", PEM, "vc01", "Bearer abc"])
    assert cap.leaks(cap.redact(rec, hosts=("vc01",)), hosts=("vc01",)) == []


def test_envelope_carries_the_format_version():
    out = cap.envelope({"vsphere": {}}, redact_names=False)
    assert out == {"format_version": cap.FORMAT_VERSION, "names_redacted": False, "vsphere": {}}


def test_names_of_collects_the_names_redact_names_replaces():
    sections = {"vsphere": {"hosts": [{"name": "esx-01", "cluster": "gpu-h100", "vgpu_vms": [{"name": "vm-a"}]},
                                      {"name": "esx-02", "cluster": None}],
                            "drs": {"gpu-h100": {}}, "namespaces": {"team-x": {}}, "vm_classes": {"serve-h100": {}},
                            "cluster_names": {"domain-c8": "gpu-h100"}},
                "vks": {"platform": {"machine_deployments": {"inference": {}}}},
                "guest": {"resource_quotas": {"team-x-guest": []}}}
    assert cap.names_of(sections) == ["esx-01", "esx-02", "gpu-h100", "inference", "platform", "serve-h100",
                                      "team-x", "team-x-guest", "vm-a"]


def test_option_checks():
    good = {"dest": "/c.json", "supervisor_kubeconfig": None, "kubeconfig": None, "clusters": None, "redact_hosts": []}
    assert cap.gpu_pool_capture_errors(good) == []
    assert cap.gpu_pool_capture_errors(dict(good, dest="")) != []
    assert cap.gpu_pool_capture_errors(dict(good, redact_hosts=["dls", ""])) != []
