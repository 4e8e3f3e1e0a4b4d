"""The custom attributes the collection records on vCenter objects (drs_gpu_pinning's record on the
cluster, the host record): how the definition is found, defined and written, through the client layer."""
import pytest
from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient, VsphereError, VsphereFault
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._drs_api import RECORD_FIELD, ClusterPinning


def field(key, name=RECORD_FIELD, mo_type=vim.ClusterComputeResource):
    return vim.CustomFieldsManager.FieldDef(key=key, name=name, managedObjectType=mo_type)


class Manager:
    def __init__(self, add_fails=None, set_fails=None):
        self.add_fails = add_fails
        self.set_fails = set_fails
        self.calls = []

    def AddCustomFieldDef(self, name, moType):  # noqa: N802 - the vSphere API's name
        self.calls.append(("AddCustomFieldDef", name, moType))
        if self.add_fails is not None:
            raise self.add_fails
        return field(7)

    def SetField(self, entity, key, value):  # noqa: N802 - the vSphere API's name
        self.calls.append(("SetField", entity, key, value))
        if self.set_fails is not None:
            raise self.set_fails


class Props:
    def __init__(self, props):
        self.props = props

    def get(self, name, default=None):
        return self.props.get(name, default)


class Client(VsphereClient):
    """The client layer's custom-attribute methods over a fake CustomFieldsManager (no session)."""

    def __init__(self, manager, fields=()):  # pylint: disable=super-init-not-called
        self.content = type("Content", (), {"customFieldsManager": manager})()
        self._fields = None
        self.fields = list(fields)
        self.reads = 0

    def retrieve_objects(self, objs, properties):
        self.reads += 1
        assert properties == ["field"]
        return [Props({"field": self.fields})]


CLUSTER = vim.ClusterComputeResource("domain-c8")


def pinning(manager, fields=(), known=True):
    client = Client(manager, fields)
    if known:
        client.know_custom_fields(fields)
    out = ClusterPinning(client, "gpu-h100")
    out.cluster = CLUSTER
    return out


def test_key_prefers_the_cluster_field_then_a_global_one():
    def key(fields):
        client = Client(Manager())
        client.know_custom_fields(fields)
        return client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)

    assert key([field(3, name="other"), field(4, mo_type=None), field(5)]) == 5
    assert key([field(4, mo_type=None)]) == 4
    assert key([field(4, mo_type=vim.VirtualMachine)]) is None
    assert key(None) is None


def test_definitions_read_once_when_not_known():
    client = Client(Manager(), fields=[field(5)])
    assert client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource) == 5
    assert client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource) == 5
    assert client.reads == 1


def test_defined_once_then_set():
    manager = Manager()
    pin = pinning(manager)
    pin.write_record(["vm-10", "vm-9"])
    assert manager.calls == [("AddCustomFieldDef", RECORD_FIELD, vim.ClusterComputeResource),
                             ("SetField", CLUSTER, 7, "vm-9,vm-10")]
    assert pin.record_key == 7
    pin.write_record([])
    assert manager.calls[-1] == ("SetField", CLUSTER, 7, "")
    assert len(manager.calls) == 3


def test_defined_by_another_run_in_between():
    manager = Manager(add_fails=VsphereFault(vim.fault.DuplicateName(name=RECORD_FIELD), "AddCustomFieldDef"))
    pin = pinning(manager, fields=[field(11)], known=False)
    pin.client.fields = []
    pin.client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)  # read: not there yet
    pin.client.fields = [field(11)]  # the other run defined it
    pin.write_record(["vm-1"])
    assert pin.client.reads == 2 and manager.calls[-1] == ("SetField", CLUSTER, 11, "vm-1")


def test_a_field_of_that_name_for_other_objects_fails_clearly():
    manager = Manager(add_fails=VsphereFault(vim.fault.DuplicateName(name=RECORD_FIELD), "AddCustomFieldDef"))
    pin = pinning(manager, fields=[field(11, mo_type=vim.VirtualMachine)])
    with pytest.raises(VsphereError, match="exists, but not for ClusterComputeResource objects"):
        pin.write_record(["vm-1"])


def test_a_refused_write_names_the_attribute_and_cluster():
    fault = VsphereFault(vim.fault.NoPermission(privilegeId="Global.SetCustomField"), "SetField")
    pin = pinning(Manager(set_fails=fault), fields=[field(3)])
    with pytest.raises(VsphereError, match="custom attribute gpupool.vcf.drs-pinned of cluster gpu-h100: SetField"):
        pin.write_record(["vm-1"])
