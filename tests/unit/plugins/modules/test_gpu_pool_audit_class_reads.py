"""gpu_pool_audit reads the VM classes once per run for the vSphere link and, with class revisions, the VKS
link; without revisions, or without the Supervisor's vCenter, the VKS link reads none."""
import copy
import pathlib

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _pool_reader as audit
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound
from tests.lib.fake_module import FakeModule

ROOT = pathlib.Path(__file__).resolve().parents[4]
DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def derived(revisions):
    d = copy.deepcopy(DESIGN)
    d["supervisor"]["vm_class_revisions"] = revisions
    return derive(d)


class Rest:
    """The /api answers the audit's vSphere reads ask for, each GET counted by path."""

    def __init__(self):
        self.gets = []

    def get(self, path):
        self.gets.append(path)
        if path == audit.VM_CLASSES_PATH:
            return [{"id": "gpu-inference", "cpu_count": 8, "memory_MB": 65536,
                     "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-3-40c"}]}}]
        if path == audit.POLICIES_PATH:
            return []
        raise VsphereNotFound(path)


class Module(FakeModule):
    def __init__(self, **params):
        super(Module, self).__init__(dict(dict(vcenter=None, hostname="vc.example.com"), **params))
        self.rest = Rest()

    def rest_client(self):
        return self.rest


def test_the_vsphere_and_vks_links_share_one_read_of_the_classes():
    module, want = Module(), derived(True)
    live = audit.read_vsphere(module, want)["vm_classes"]
    assert audit.read_pool_classes(module, want) is live
    assert module.rest.gets.count(audit.VM_CLASSES_PATH) == 1
    assert set(live) == {"gpu-inference"}


def test_the_vks_link_reads_no_classes_without_revisions_or_the_supervisors_vcenter():
    module = Module()
    assert audit.read_pool_classes(module, derived(False)) is None
    assert audit.read_pool_classes(Module(hostname=None), derived(True)) is None
    assert audit.read_pool_classes(Module(vcenter="elsewhere"), derived(True)) is None
    assert module.rest.gets == []
