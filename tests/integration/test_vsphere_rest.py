"""The REST client layer against the simulator: /api/session login, verified TLS, errors."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereConnectionError, VsphereNotFound
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient, VsphereRestError

FLEET = {"clusters": [{"name": "gpu-a", "supervisor": True,
                       "hosts": [{"name": "esx-a-01", "gpu": {"model": "L40S", "count": 1}}]}]}


def client(env, **over):
    args = dict(hostname=env["VMWARE_HOST"], username=env["VMWARE_USER"], password=env["VMWARE_PASSWORD"],
                port=int(env["VMWARE_PORT"]), ca_file=env["VMWARE_CA_FILE"])
    args.update(over)
    return VsphereRestClient(**args)


def test_session_and_supervisor_listing(vsphere_env):
    with client(vsphere_env) as c:
        clusters = c.get("/api/vcenter/namespace-management/clusters")
        assert [x["cluster_name"] for x in clusters] == ["gpu-a"]
    # logged out: the session id no longer works
    with pytest.raises(VsphereRestError) as err:
        c.get("/api/vcenter/namespace-management/clusters")
    assert err.value.status == 401


def test_wrong_password(vsphere_env):
    with pytest.raises(VsphereConnectionError, match="invalid user name or password"):
        client(vsphere_env, password="nope")


def test_untrusted_certificate(vsphere_env):
    with pytest.raises(VsphereConnectionError, match="not trusted"):
        client(vsphere_env, ca_file=None)


def test_not_found_and_errors(vsphere_env):
    with client(vsphere_env) as c:
        with pytest.raises(VsphereNotFound):
            c.get("/api/vcenter/namespace-management/virtual-machine-classes/no-such-class")


def test_relogin_after_the_session_is_ended_elsewhere(vsphere_env):
    """A session vCenter forgot (expired, killed, vCenter restarted) is logged in again once."""
    with client(vsphere_env, retry_delay=0.01) as c:
        c.http.delete(c.base + "/api/session", timeout=10, verify=c.verify)
        clusters = c.get("/api/vcenter/namespace-management/clusters")
        assert [x["cluster_name"] for x in clusters] == ["gpu-a"]
        assert c.relogins == 1
