"""runner/_vcenter_session: the vCenter options under a prefix (environment fallbacks, no VMWARE_HOST) and the
one VsphereClient made from them."""
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _vcenter_session
from tests.lib.module_main import module_args


def test_the_options_take_the_vmware_environment_but_not_the_host(monkeypatch):
    monkeypatch.setenv("VMWARE_HOST", "vcenter.elsewhere")
    monkeypatch.setenv("VMWARE_USER", "reader@vsphere.local")
    monkeypatch.setenv("VMWARE_PORT", "8443")
    with module_args({}):
        params = AnsibleModule(argument_spec=_vcenter_session.vcenter_argument_spec()).params
    assert params["vcenter_hostname"] is None  # VMWARE_HOST set for other modules does not turn the read on
    assert params["vcenter_username"] == "reader@vsphere.local" and params["vcenter_port"] == 8443
    assert params["vcenter_validate_certs"] is True and params["vcenter_ca_file"] is None
    assert [k for k, v in _vcenter_session.vcenter_argument_spec("vc_").items() if v.get("no_log")] == ["vc_password"]


def test_the_client_is_made_once_from_the_prefixed_options(monkeypatch):
    made = []

    class Client:
        def __init__(self, hostname, username, password, **kwargs):
            made.append(dict(kwargs, hostname=hostname, username=username, password=password))

    monkeypatch.setattr(_vcenter_session, "VsphereClient", Client)
    params = dict(vcenter_hostname="vc", vcenter_username="u", vcenter_password="p", vcenter_port=443,
                  vcenter_validate_certs=False, vcenter_ca_file="/ca.pem")
    assert isinstance(_vcenter_session.vcenter_client(params, 60, 2), Client)
    assert made == [dict(hostname="vc", username="u", password="p", port=443, validate_certs=False,
                         ca_file="/ca.pem", timeout=60, retries=2)]
