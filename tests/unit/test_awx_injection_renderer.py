"""The model of the controller's credential injection (tests/lib/awx_injection.py) on the credential
types of examples/awx/credential_types.yml: what a job gets, what the controller stores, what it
refuses."""
import copy
import os
import stat

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader

from tests.lib import awx_injection as awx

TYPES = awx.credential_types()
VCENTER = {"host": "vc.example.com", "username": "svc", "password": "Vc-Secret-1"}


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_every_type_is_valid():
    assert sorted(TYPES) == ["gpupool DLS", "gpupool ESXi SSH", "gpupool Supervisor kubeconfig",
                             "gpupool guest kubeconfig", "gpupool vCenter"]
    for ctype in TYPES.values():
        awx.check_type(ctype)


def test_vcenter_environment_with_ca(tmp_path):
    out = awx.inject(TYPES["gpupool vCenter"], dict(VCENTER, ca="-----BEGIN CERTIFICATE-----\nX\n"), tmp_path)
    ca = out.files["template.ca"]
    assert out.env == {"VMWARE_HOST": "vc.example.com", "VMWARE_USER": "svc", "VMWARE_PASSWORD": "Vc-Secret-1",
                       "VMWARE_PORT": "443", "VMWARE_VALIDATE_CERTS": "true", "VMWARE_CA_FILE": ca}
    assert out.safe_env == dict(out.env, VMWARE_PASSWORD=awx.MASK)
    assert open(ca).read() == "-----BEGIN CERTIFICATE-----\nX\n" and mode(ca) == 0o600
    assert ca.startswith(str(tmp_path / "env"))
    assert out.extra_vars == {} and out.args == []


def test_vcenter_without_ca_keeps_the_system_store(tmp_path):
    out = awx.inject(TYPES["gpupool vCenter"], dict(VCENTER, port="8443"), tmp_path)
    assert out.env["VMWARE_CA_FILE"] == "" and out.env["VMWARE_PORT"] == "8443"


def test_kubeconfig_extra_vars_file(tmp_path):
    out = awx.inject(TYPES["gpupool guest kubeconfig"], {"kubeconfig": "apiVersion: v1\n"}, tmp_path)
    path = out.files["template"]
    assert out.extra_vars == {"gpupool_guest_kubeconfig": path, "audit_kubeconfig": path}
    assert out.args == ["-e", "@%s" % out.extra_vars_file] and mode(out.extra_vars_file) == 0o400
    assert out.env == {} and open(path).read() == "apiVersion: v1\n"
    # Ansible reads the file's values as unsafe: never templated
    loaded = DataLoader().load_from_file(out.extra_vars_file)
    assert loaded == out.extra_vars
    assert "!unsafe" in open(out.extra_vars_file).read()


def test_dls_extra_vars(tmp_path):
    out = awx.inject(TYPES["gpupool DLS"], {"host": "dls", "username": "u", "password": "{{ lookup('pipe', 'id') }}"},
                     tmp_path)
    assert out.extra_vars["gpupool_dls_password"] == "{{ lookup('pipe', 'id') }}"  # rendered once, as given
    assert out.extra_vars["gpupool_dls_port"] == "443" and out.extra_vars["gpupool_dls_ca_file"] == ""
    text = open(out.extra_vars_file).read()
    assert "gpupool_dls_password: !unsafe" in text


def test_ssh_key_gets_its_newline(tmp_path):
    out = awx.inject(TYPES["gpupool ESXi SSH"], {"ssh_key_data": "-----BEGIN KEY-----\nabc\n-----END KEY-----"}, tmp_path)
    key = out.extra_vars["esxi_gpu_host_ssh_private_key_file"]
    assert open(key).read().endswith("-----END KEY-----\n") and mode(key) == 0o600
    assert out.extra_vars["esxi_gpu_host_ssh_user"] == "root" and out.extra_vars["esxi_gpu_host_ssh_known_hosts_file"] == ""


@pytest.mark.parametrize("inputs, message", [
    ({"host": "vc", "username": "svc"}, "password is required"),
    (dict(VCENTER, port=443), "port must be a str"),
    (dict(VCENTER, token="x"), "no such field: token"),
])
def test_credentials_the_controller_refuses(tmp_path, inputs, message):
    with pytest.raises(awx.InjectionError, match=message):
        awx.inject(TYPES["gpupool vCenter"], inputs, tmp_path)


def broken(change):
    ctype = copy.deepcopy(TYPES["gpupool vCenter"])
    change(ctype)
    return ctype


@pytest.mark.parametrize("ctype, message", [
    (broken(lambda t: t["injectors"]["env"].update(ANSIBLE_CONFIG="x")), "may not set ANSIBLE_CONFIG"),
    (broken(lambda t: t["injectors"]["env"].update(VMWARE_X="{{ hots }}")), "names hots, which is no field"),
    (broken(lambda t: t["injectors"]["file"].update(template="{{ ca }}")), "file injectors"),
    (broken(lambda t: t.update(kind="ssh")), "kind must be cloud or net"),
    (broken(lambda t: t["inputs"]["required"].append("realm")), "required names no field: realm"),
    (broken(lambda t: t["inputs"]["fields"].append({"id": "n", "label": "n", "type": "integer"})), "has type"),
])
def test_types_the_controller_refuses(ctype, message):
    with pytest.raises(awx.InjectionError, match=message):
        awx.check_type(ctype)


def test_job_extravars_survey_unsafe_template_vars_not():
    text = awx.unsafe_dump({"gpupool_design_file": "{{ playbook_dir }}/x", "gpupool_design_path": "{{ evil }}"},
                           safe={"gpupool_design_file": "{{ playbook_dir }}/x"})
    assert "gpupool_design_file: '{{ playbook_dir }}/x'" in text
    assert "gpupool_design_path: !unsafe '{{ evil }}'" in text


def test_survey_answers():
    survey = awx.job_templates()["gpupool audit"]["survey"]
    assert awx.survey_answers(survey, {}) == {"audit_design_file": "examples/design.yml",
                                              "audit_report_format": "markdown", "audit_fail_on": "error"}
    assert awx.survey_answers(survey, {"audit_fail_on": "none"})["audit_fail_on"] == "none"
    with pytest.raises(awx.InjectionError, match="must be one of"):
        awx.survey_answers(survey, {"audit_report_format": "pdf"})
    with pytest.raises(awx.InjectionError, match="asks no audit_links"):
        awx.survey_answers(survey, {"audit_links": ["esxi"]})
    with pytest.raises(awx.InjectionError, match="1024 characters"):
        awx.survey_answers(survey, {"audit_design_file": "x" * 1025})


def test_job_folder(tmp_path):
    template = awx.job_templates()["gpupool host rebuild"]
    creds = {"gpupool vCenter": VCENTER, "gpupool ESXi SSH": {"ssh_key_data": "k"}}
    with pytest.raises(awx.InjectionError, match="missing"):
        awx.Job(tmp_path / "a", template, {"gpupool vCenter": VCENTER}, {"host": "esx-01"})
    with pytest.raises(awx.InjectionError, match="host is required"):
        awx.Job(tmp_path / "b", template, creds, {})
    with pytest.raises(awx.InjectionError, match="does not ask the job type"):
        awx.Job(tmp_path / "c", awx.job_templates()["gpupool audit"], dict(creds, **{
            "gpupool Supervisor kubeconfig": {"kubeconfig": "k"}, "gpupool guest kubeconfig": {"kubeconfig": "k"},
            "gpupool DLS": {"host": "d", "username": "u", "password": "p"}}), {}, job_type="check")
    job = awx.Job(tmp_path / "d", template, creds, {"host": "esx-01"}, job_type="check", job_id=7)
    env = tmp_path / "d" / "env"
    assert mode(env) == 0o700 and mode(env / "extravars") == 0o400
    extravars = yaml.load((env / "extravars").read_text(), Loader=awx._Loader)
    assert extravars["host"] == "esx-01" and extravars["awx_job_id"] == 7
    assert "host: !unsafe 'esx-01'" in (env / "extravars").read_text()
    cmdline = (env / "cmdline").read_text().split()
    assert "--check" in cmdline and cmdline.count("-e") == 1 and cmdline[-2:] == ["--forks", "5"]
    assert yaml.safe_load((env / "envvars").read_text())["VMWARE_PASSWORD"] == "Vc-Secret-1"
    assert job.safe_env["VMWARE_PASSWORD"] == awx.MASK
    assert set(yaml.safe_load((env / "passwords").read_text()).values()) == {""}
