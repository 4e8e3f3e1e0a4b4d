"""drs_gpu_pinning: how the record's custom attribute is found, defined and written (no vCenter)."""
import pytest
from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules.drs_gpu_pinning import RECORD_FIELD, ClusterPinning


def field(key, name=RECORD_FIELD, mo_type=vim.ClusterComputeResource):
    return vim.CustomFieldsManager.FieldDef(key=key, name=name, managedObjectType=mo_type)


class Wrapped(VsphereError):
    """A fault as a client layer that wraps faults hands it over."""

    def __init__(self, fault):
        super(Wrapped, self).__init__("wrapped")
        self.fault = fault


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


class Client:
    def __init__(self, manager, fields=()):
        self.content = type("Content", (), {"customFieldsManager": manager})()
        self.fields = list(fields)
        self.reads = 0

    def retrieve_objects(self, objs, properties):
        self.reads += 1
        assert properties == ["field"]
        return [Props({"field": self.fields})]


def pinning(manager, fields=(), key=None):
    out = ClusterPinning(Client(manager, fields), "gpu-h100")
    out.cluster = "cluster-object"
    out.record_key = key
    return out


def test_record_key_prefers_the_cluster_field_then_a_global_one():
    assert ClusterPinning._record_key([field(3, name="other"), field(4, mo_type=None), field(5)]) == 5
    assert ClusterPinning._record_key([field(4, mo_type=None)]) == 4
    assert ClusterPinning._record_key([field(4, mo_type=vim.VirtualMachine)]) is None
    assert ClusterPinning._record_key(None) is None


def test_defined_once_then_set():
    manager = Manager()
    pin = pinning(manager)
    pin.write_record(["vm-10", "vm-9"])
    assert manager.calls == [("AddCustomFieldDef", RECORD_FIELD, vim.ClusterComputeResource),
                             ("SetField", "cluster-object", 7, "vm-9,vm-10")]
    pin.write_record([])
    assert manager.calls[-1] == ("SetField", "cluster-object", 7, "")
    assert len(manager.calls) == 3


@pytest.mark.parametrize("fault", [vim.fault.DuplicateName(name=RECORD_FIELD), Wrapped(vim.fault.DuplicateName())])
def test_defined_by_another_run_in_between(fault):
    manager = Manager(add_fails=fault)
    pin = pinning(manager, fields=[field(11)])
    pin.write_record(["vm-1"])
    assert pin.client.reads == 1 and manager.calls[-1] == ("SetField", "cluster-object", 11, "vm-1")


def test_a_field_of_that_name_for_other_objects_fails_clearly():
    pin = pinning(Manager(add_fails=vim.fault.DuplicateName()), fields=[field(11, mo_type=vim.VirtualMachine)])
    with pytest.raises(VsphereError, match="exists, but not for clusters"):
        pin.write_record(["vm-1"])


@pytest.mark.parametrize("fault", [vim.fault.NoPermission(privilegeId="Global.SetCustomField"),
                                   Wrapped(vim.fault.NoPermission())])
def test_a_refused_write_names_the_attribute_and_cluster(fault):
    pin = pinning(Manager(set_fails=fault), key=3)
    with pytest.raises(VsphereError, match="custom attribute gpupool.vcf.drs-pinned of cluster gpu-h100"):
        pin.write_record(["vm-1"])
