"""Live ESXi host records as the audit reads them (gpu_host_info's shape), made by hand against the example
design's derived inputs, for the audit's unit tests: ``host`` is a host that agrees with its cluster's design
unless told otherwise (``**fields`` replace whole fields); ``DERIVED`` is derive() of examples/design.yml
(read it, do not change it: deep-copy it first)."""
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.lib.paths import ROOT

DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
FULL = "550.90.05-1OEM.800.1.0.20613240"
OLD = "550.54.10-1OEM.800.1.0.20613240"


def options_for(want):
    """The nvidia module options the role writes for a cluster's scheduler ("" for best effort)."""
    return "" if want["rmpvmrl"] == "0x00000000" else "NVreg_RegistryDwords=RmPVMRL=%s" % want["rmpvmrl"]


def host(name, cluster="gpu-h100", version=FULL, vms=(), **fields):
    """A connected host of ``cluster`` with 4 GPUs, the driver ``version`` (None: none installed), graphics,
    scheduler and module options as the cluster's design wants, and the vGPU VMs ``vms``."""
    want = DERIVED["esxi"]["clusters"][cluster]
    rec = dict(name=name, cluster=cluster, connection_state="connected", maintenance_mode=False, gpu_count=4,
               graphics=dict(default_type="shared_direct", assignment_policy=want["assignment_policy"],
                             device_types={"0000:3b:00.0": "shared_direct"}),
               driver=dict(version=version.split("-")[0] if version else None, full_version=version),
               scheduler=dict(policy=want["scheduler"]["policy"], rmpvmrl=want["rmpvmrl"],
                              canonical_rmpvmrl=want["rmpvmrl"]),
               nvidia_module_options=options_for(want), gpus=[dict(pci_id="0000:3b:00.0")],
               vgpu_profiles=["nvidia_h100-3-40c"], vgpu_vms=list(vms or ()), errors=[])
    rec.update(fields)
    return rec
