"""The modules on the resource runner, with their client layer replaced by fakes: what each plans,
what check mode predicts, the calls a real run makes, and what a failure says and leaves."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls import _nls
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereTaskError
from ansible_collections.gpupool.vcf.plugins.modules import (
    dls_client_token,
    esxi_maintenance_mode,
    supervisor_namespace,
    vlcm_component,
    vm_class,
)
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % NEW


def run(module_file, resource_class, params, **flags):
    module = Module(dict(module_file_defaults(module_file), **params), partial={}, warnings_expected=False, **flags)
    with pytest.raises(Exited) as exc:
        Runner(module, resource_class(module)).run()
    return exc.value.result


def module_file_defaults(module_file):
    return dict((k, v.get("default")) for k, v in module_file.ARGUMENT_SPEC.items())


# -- vm_class ------------------------------------------------------------------------------

class FakeClasses:
    """VmClassApi over a dict of class Infos; ``fail`` names a method that raises."""

    store = {}
    calls = []
    fail = None

    def __init__(self, rest):
        assert rest == "rest session"

    def _call(self, *call):
        FakeClasses.calls.append(call)
        if call[0] == FakeClasses.fail:
            raise VsphereError("HTTP 500 internal error")

    def get(self, name):
        self._call("get", name)
        return FakeClasses.store.get(name)

    def create(self, body):
        self._call("create", body)
        info = dict(body)
        FakeClasses.store[info.pop("id")] = info

    def update(self, name, body):
        self._call("update", name, body)
        FakeClasses.store[name].update(body)

    def delete(self, name):
        self._call("delete", name)
        del FakeClasses.store[name]


@pytest.fixture
def classes(monkeypatch):
    FakeClasses.store, FakeClasses.calls, FakeClasses.fail = {}, [], None
    monkeypatch.setattr(vm_class, "VmClassApi", FakeClasses)
    monkeypatch.setattr(vm_class, "offered_profiles", lambda client, cluster: {"nvidia_h100-1-10c", "nvidia_h100-80c"})
    monkeypatch.setattr(vm_class, "api_version", lambda client: "8.0.3.0")
    return FakeClasses


SMALL = dict(name="gpu-small", cpu_count=4, memory_mb=16384, vgpu_profiles=["nvidia_h100-1-10c"], cluster="gpu-h100")


def test_vm_class_check_mode_predicts_the_create(classes):
    check = run(vm_class, vm_class.VmClass, SMALL, check_mode=True, diff=True)
    assert [c[0] for c in classes.calls] == ["get"] and classes.store == {}
    real = run(vm_class, vm_class.VmClass, SMALL, diff=True)
    assert check == real and real["changed"] is True and real["api_form"] == "config_spec"
    assert real["changed_fields"] == list(vm_class.vmc.FIELDS)
    assert real["diff"]["before"] is None and real["vm_class"]["memory_reservation"] == 100
    body = classes.calls[-1][1]
    assert classes.calls[-1][0] == "create" and body["id"] == "gpu-small" and body["memory_reservation"] == 100
    again = run(vm_class, vm_class.VmClass, SMALL)
    assert again["changed"] is False and again["changed_fields"] == [] and classes.calls[-1][0] == "get"


def test_vm_class_update_failure_names_the_update_and_what_was_attempted(classes):
    run(vm_class, vm_class.VmClass, SMALL)
    classes.fail = "update"
    res = run(vm_class, vm_class.VmClass, dict(SMALL, cpu_count=8))
    assert res["failed"] and res["msg"] == "Unable to update VM class gpu-small: HTTP 500 internal error"
    assert res["changed_fields"] == ["cpu_count"] and "changed" not in res


def test_vm_class_refusals_name_the_class_and_read_nothing_first(classes):
    res = run(vm_class, vm_class.VmClass, dict(name="gpu-x", memory_reservation=150))
    assert res["msg"].startswith("Unable to manage VM class gpu-x: memory_reservation must be a percentage")
    assert classes.calls == []
    res = run(vm_class, vm_class.VmClass, dict(SMALL, vgpu_profiles=["nvidia_l40s-48q"]))
    assert "not offered by the hosts of cluster gpu-h100" in res["msg"] and classes.calls == []
    res = run(vm_class, vm_class.VmClass, dict(name="gpu-x", cpu_count=2))
    assert res["msg"] == "Unable to manage VM class gpu-x: memory_mb required to create a VM class"


def test_vm_class_delete(classes):
    run(vm_class, vm_class.VmClass, SMALL)
    res = run(vm_class, vm_class.VmClass, dict(name="gpu-small", state="absent"), diff=True)
    assert res["changed"] is True and res["vm_class"] is None and res["diff"]["after"] is None
    assert classes.calls[-1] == ("delete", "gpu-small") and classes.store == {}
    res = run(vm_class, vm_class.VmClass, dict(name="gpu-small", state="absent"))
    assert res["changed"] is False and res["changed_fields"] == []


# -- supervisor_namespace ------------------------------------------------------------------

class FakeNamespaces:
    store = {}
    calls = []

    def __init__(self, rest, soap=None, api_version=None):
        self.soap = soap

    def get(self, name):
        return FakeNamespaces.store.get(name)

    def supervisors(self):
        return [{"cluster": "domain-c9", "cluster_name": "gpu-h100"}]

    def cluster_exists(self, name):
        return name == "mgmt"

    def policy_names(self):
        return {"pol-1": "gold"}

    def library_names(self, wanted):
        return {"lib-1": "vm-images"}

    def create(self, body, by_supervisor=False):
        FakeNamespaces.calls.append(("create", body["namespace"], by_supervisor))
        FakeNamespaces.store[body["namespace"]] = dict(body, cluster=body.get("cluster") or body.get("supervisor"))

    def update(self, name, body):
        FakeNamespaces.calls.append(("update", name, sorted(body)))
        FakeNamespaces.store[name].update(body)

    def delete(self, name):
        FakeNamespaces.calls.append(("delete", name))
        del FakeNamespaces.store[name]

    def set_access(self, name, method, entry):
        FakeNamespaces.calls.append(("access", name, method, entry["subject"]))
        access = [a for a in FakeNamespaces.store[name]["access_list"] if a["subject"] != entry["subject"]]
        if method != "DELETE":
            access.append(dict(subject_type=entry["type"], domain=entry["domain"], subject=entry["subject"],
                               role=entry["role"]))
        FakeNamespaces.store[name]["access_list"] = access


@pytest.fixture
def namespaces(monkeypatch):
    FakeNamespaces.store, FakeNamespaces.calls = {}, []
    monkeypatch.setattr(supervisor_namespace, "NamespaceApi", FakeNamespaces)
    return FakeNamespaces


def test_namespace_create_rerun_and_access_change(namespaces):
    args = dict(name="team-a", cluster="gpu-h100", vm_classes=["gpu-small"], storage_policies=[{"policy": "gold"}],
                content_libraries=["vm-images"], access=[{"subject": "alice", "domain": "vsphere.local", "role": "EDIT"}])
    check = run(supervisor_namespace, supervisor_namespace.Namespace, args, check_mode=True, diff=True)
    assert namespaces.calls == []
    real = run(supervisor_namespace, supervisor_namespace.Namespace, args, diff=True)
    assert check == real and real["changed"] is True and namespaces.calls == [("create", "team-a", False)]
    assert real["namespace"]["storage_policies"] == {"pol-1": None} and real["namespace"]["cluster"] == "domain-c9"
    assert run(supervisor_namespace, supervisor_namespace.Namespace, args)["changed"] is False
    args["access"][0]["role"] = "VIEW"
    res = run(supervisor_namespace, supervisor_namespace.Namespace, args)
    assert res["changed_fields"] == ["access"] and namespaces.calls[-1] == ("access", "team-a", "PUT", "alice")


def test_namespace_refusals(namespaces):
    res = run(supervisor_namespace, supervisor_namespace.Namespace, dict(name="team-b", cluster="mgmt"))
    assert res["msg"].startswith("Unable to manage namespace team-b: cluster mgmt is not a Supervisor")
    res = run(supervisor_namespace, supervisor_namespace.Namespace, dict(name="team-b", description="x"))
    assert res["msg"] == "Unable to manage namespace team-b: cluster or supervisor is required to create namespace team-b"
    res = run(supervisor_namespace, supervisor_namespace.Namespace,
              dict(name="team-b", cluster="gpu-h100", storage_policies=[{"policy": "silver"}]))
    assert "unknown storage policy silver; storage policies: gold" in res["msg"]
    assert namespaces.calls == []


# -- vlcm_component ------------------------------------------------------------------------

class FakeImage:
    """VlcmApi of one image-managed cluster with two hosts on OLD; an offline depot of NEW can be imported."""

    options = {}  # set by a test before the run: fail (a method that raises), offer (versions a depot offers)

    def __init__(self, rest, moid, timeout=7200):
        self.version = OLD
        self.depots_now = {}
        self.hosts = {"host-1": OLD, "host-2": OLD}
        self.calls = []
        self.fail = FakeImage.options.get("fail")
        self.offer = FakeImage.options.get("offer", [NEW])
        FakeImage.last = self

    def _call(self, *call):
        self.calls.append(call)
        if call[0] == self.fail:
            raise VsphereTaskError("%s failed: host esx-02 cannot enter maintenance mode (busy)" % call[0])

    def image_managed(self):
        return True

    def component_version(self, component):
        return self.version

    def depots(self, component):
        offered = dict((d, list(self.offer)) for d in self.depots_now)
        return dict(self.depots_now), offered

    def compliance(self, host_names, component):
        return dict((host_names[h], dict(status="COMPLIANT" if v == self.version else "NON_COMPLIANT",
                                         current_version=v, desired_version=self.version))
                    for h, v in self.hosts.items())

    def import_depot(self, location):
        self._call("import_depot", location)
        self.depots_now["depot-1"] = {"location": location}

    def remove_depot(self, depot_id):
        self._call("remove_depot", depot_id)
        del self.depots_now[depot_id]

    def set_component(self, component, version):
        self._call("set_component", version)
        self.version = version

    def remediate(self, hosts=None):
        self._call("remediate")
        self.remediated_hosts = hosts
        self.hosts = dict.fromkeys(self.hosts, self.version)


@pytest.fixture
def image(monkeypatch):
    FakeImage.options = {}
    monkeypatch.setattr(vlcm_component, "VlcmApi", FakeImage)
    monkeypatch.setattr(vlcm_component, "cluster_hosts", lambda client, name: (
        ("domain-c1", {"host-1": "esx-01", "host-2": "esx-02"}, ["img"]) if name == "img" else (None, {}, ["img"])))
    return FakeImage


def vlcm(**params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    return run(vlcm_component, vlcm_component.VlcmComponent, params, **flags)


def test_vlcm_check_mode_predicts_import_commit_and_remediation(image):
    args = dict(cluster="img", version="550.90.05", depot_url=DEPOT, remediate=True)
    check = vlcm(check_mode=True, diff=True, **args)
    assert image.last.calls == []
    assert check["changed"] is True and check["depot_imported"] is True and check["remediated"] is True
    assert check["desired_after"] == NEW and check["depot"] is None
    assert check["diff"] == dict(before=dict(component="NVD-AIE-800", version=OLD),
                                 after=dict(component="NVD-AIE-800", version=NEW))
    real = vlcm(diff=True, **args)
    assert [c[0] for c in image.last.calls] == ["import_depot", "set_component", "remediate"]
    assert dict(real, depot=None) == check and real["depot"] == "depot-1"


def test_vlcm_depot_without_the_component_is_removed_again(image):
    image.options = dict(offer=[])
    res = vlcm(cluster="img", version=NEW, depot_url="https://depot.example.com/vendor-addon.zip")
    assert res["msg"] == ("Depot https://depot.example.com/vendor-addon.zip does not offer component NVD-AIE-800; "
                          "it was removed again. Nothing was changed.")
    assert [c[0] for c in image.last.calls] == ["import_depot", "remove_depot"]


def test_vlcm_failed_commit_removes_the_imported_depot(image):
    image.options = dict(fail="set_component")
    res = vlcm(cluster="img", version=NEW, depot_url=DEPOT)
    assert res["msg"].startswith("Unable to set component NVD-AIE-800 %s in the image of cluster img: set_component failed" % NEW)
    assert [c[0] for c in image.last.calls] == ["import_depot", "set_component", "remove_depot"]


def test_vlcm_failed_remediation_returns_the_compliance_it_left(image):
    image.options = dict(fail="remediate")
    res = vlcm(cluster="img", version=NEW, depot_url=DEPOT, remediate=True)
    assert res["msg"].startswith("Unable to remediate cluster img to NVD-AIE-800 %s: remediate failed" % NEW)
    assert res["compliance"]["esx-02"]["status"] == "NON_COMPLIANT" and res["desired_after"] == NEW


def test_vlcm_messages_before_any_change(image):
    assert vlcm(cluster="ghost", version=NEW)["msg"] == "Unable to find cluster ghost: clusters are img. Nothing was changed."
    assert vlcm(cluster="img", version="latest")["msg"].startswith("Invalid version for component NVD-AIE-800")
    res = vlcm(cluster="img", version="560.28.03")
    assert "no imported depot offers component NVD-AIE-800 at version 560.28.03" in res["msg"]
    res = vlcm(cluster="img", version=OLD)
    assert res["changed"] is False and res["desired_after"] == OLD and image.last.calls == []


# -- esxi_maintenance_mode -----------------------------------------------------------------

class FakeHost:
    def __init__(self, props):
        self.props = props

    def get(self, name, default=None):
        return self.props.get(name, default)


class FakeHostOps:
    """EsxiHosts of esx-01 (its reads and writes)."""

    options = {}

    def __init__(self, client):
        self.calls = []
        FakeHostOps.last = self

    def read(self, names, driver=False, left_off=False):
        item = dict(host=FakeHost({"name": "esx-01"}), name="esx-01",
                    in_maintenance=FakeHostOps.options.get("in_mm", False))
        if left_off:
            item["left_off"] = [dict(name=n, moid="vm-" + n) for n in FakeHostOps.options.get("recorded", [])]
        return [item]

    def read_vgpu_vms(self, items):
        for item in items:
            item["vgpu_vms"] = [dict(name="infer-01", power_state="poweredOn")] if FakeHostOps.options.get("vgpu_vm") else []
        return items

    def powered_on_vgpu_vms(self, item):
        return [v for v in item["vgpu_vms"] if v["power_state"] == "poweredOn"]

    def vgpu_hotmigrate_enabled(self):
        return False

    def enter_maintenance(self, item, timeout):
        self.calls.append(("enter", timeout))
        if FakeHostOps.options.get("fail"):
            raise VsphereTaskError("enter maintenance mode did not finish within 1860s (last state: running, 40% done)")

    def exit_maintenance(self, item):
        self.calls.append(("exit",))

    def power_off_recorded(self, item, vms, off, step):
        for vm in vms:
            self.calls.append(("record", [v["name"] for v in off + [vm]]))
            step("power_off %s" % vm["name"], "power off VM %s on" % vm["name"], self.calls.append, ("off", vm["name"]))
            off.append(vm)

    def power_on_recorded(self, item, off, step):
        for vm in list(off):
            step("power_on %s" % vm["name"], "power on VM %s on" % vm["name"], self.calls.append, ("on", vm["name"]))
            off.remove(vm)
        return []


@pytest.fixture
def host_ops(monkeypatch):
    FakeHostOps.options = {}
    monkeypatch.setattr(esxi_maintenance_mode, "EsxiHosts", FakeHostOps)
    return FakeHostOps


def maintenance(**params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    return run(esxi_maintenance_mode, esxi_maintenance_mode.MaintenanceMode, dict(dict(host="esx-01"), **params), **flags)


def test_maintenance_mode_check_real_and_exit(host_ops):
    check = maintenance(check_mode=True, diff=True)
    assert host_ops.last.calls == []
    real = maintenance(diff=True)
    assert check == real == dict(changed=True, maintenance_mode=True, powered_off_vms=[], powered_on_vms=[],
                                 diff=dict(before=dict(maintenance_mode=False), after=dict(maintenance_mode=True)))
    assert host_ops.last.calls == [("enter", 1800)]
    host_ops.options = dict(in_mm=True)
    assert maintenance()["changed"] is False and host_ops.last.calls == []
    assert maintenance(state="absent")["changed"] is True and host_ops.last.calls == [("exit",)]


def test_maintenance_mode_refused_with_vgpu_vms_and_failure_named(host_ops):
    host_ops.options = dict(vgpu_vm=True)
    res = maintenance()
    assert res["msg"] == ("Unable to put host esx-01 in maintenance mode: powered-on VMs hold vGPUs and cannot be "
                          "migrated (infer-01); power them off or move them first, or set power_off_vgpu_vms. "
                          "Nothing was changed.")
    host_ops.options = dict(fail=True)
    res = maintenance()
    assert res["msg"].startswith("Unable to enter maintenance mode on host esx-01: enter maintenance mode did not finish")


# -- dls_client_token ----------------------------------------------------------------------

class FakeDls:
    composed = []

    def __init__(self, host, port, username, password, validate_certs=True, ca_file=None, timeout=30):
        self.where = "%s:%d" % (host, port)

    def discover(self, address_type):
        return {"address": "dls.example.com"}, "scope-ref"

    def compose(self, selection, scope_ref, leasing_port, expiry):
        FakeDls.composed.append(expiry)
        return "TOKEN-%d" % len(FakeDls.composed)


@pytest.fixture
def dls(monkeypatch):
    FakeDls.composed = []
    monkeypatch.setattr(_nls, "DlsClient", FakeDls)
    return FakeDls


def token(tmp_path, **params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    args = dict(dls_host="dls.example.com", username="dls_admin", password="secret", dest=str(tmp_path / "client.tok"))
    return run(dls_client_token, dls_client_token.ClientToken, dict(args, **params), **flags)


def test_token_check_mode_predicts_then_written_then_kept(tmp_path, dls):
    check = token(tmp_path, check_mode=True, diff=True)
    assert dls.composed == [] and not (tmp_path / "client.tok").exists()
    real = token(tmp_path, diff=True)
    assert check == real and real["reason"] == "missing" and real["address"] == "dls.example.com"
    assert (tmp_path / "client.tok").read_text() == "TOKEN-1\n"
    again = token(tmp_path, diff=True)
    assert again["changed"] is False and again["reason"] == "valid" and "diff" not in again


def test_token_write_failure_says_what_was_written(tmp_path, dls, monkeypatch):
    real_write = dls_client_token.atomic_write

    def no_meta(path, data, mode):
        if path.endswith(".meta.json"):
            raise PermissionError(13, "Permission denied", path)
        real_write(path, data, mode)

    monkeypatch.setattr(dls_client_token, "atomic_write", no_meta)
    res = token(tmp_path)
    dest = str(tmp_path / "client.tok")
    assert res["msg"] == ("Unable to write the token to %s: [Errno 13] Permission denied: '%s.meta.json'; the token in %s "
                          "is new but its metadata file was not written, a rerun makes both again" % (dest, dest, dest))
    assert res["written"] is True and "exception" not in res


def test_maintenance_mode_powers_vgpu_vms_off_recorded_and_on_again(host_ops):
    host_ops.options = dict(vgpu_vm=True)
    check = maintenance(check_mode=True, power_off_vgpu_vms=True)
    assert check["changed"] is True and check["powered_off_vms"] == ["infer-01"] and host_ops.last.calls == []
    real = maintenance(power_off_vgpu_vms=True)
    assert real == check
    assert host_ops.last.calls == [("record", ["infer-01"]), ("off", "infer-01"), ("enter", 1800)]
    host_ops.options = dict(in_mm=True, recorded=["infer-01"])
    check = maintenance(state="absent", power_off_vgpu_vms=True, check_mode=True)
    assert check["powered_on_vms"] == ["infer-01"] and host_ops.last.calls == []
    assert maintenance(state="absent", power_off_vgpu_vms=True)["changed"] is True
    assert host_ops.last.calls == [("exit",), ("on", "infer-01")]
    # out of maintenance mode already, the recorded VM still off: powered on (a rerun after a failed power-on)
    host_ops.options = dict(recorded=["infer-01"])
    assert maintenance(state="absent", power_off_vgpu_vms=True)["changed"] is True
    assert host_ops.last.calls == [("on", "infer-01")]


def test_vlcm_remediates_only_the_hosts_named(image):
    args = dict(cluster="img", version="550.90.05", depot_url=DEPOT, remediate=True, hosts=["esx-02"])
    real = vlcm(**args)
    assert real["remediated"] is True and image.last.remediated_hosts == ["host-2"]
    res = vlcm(cluster="img", version="550.90.05", depot_url=DEPOT, remediate=True, hosts=["esx-09"])
    assert res["msg"] == "Hosts esx-09 are not in cluster img (its hosts: esx-01, esx-02). Nothing was changed."
