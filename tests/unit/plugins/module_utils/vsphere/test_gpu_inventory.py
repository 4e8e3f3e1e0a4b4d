"""Pure parts of _gpu_inventory: the driver read from the software packages, the graphics words."""
from types import SimpleNamespace

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import driver_from_packages, host_record

FULL = "550.90.05-1OEM.800.1.0.20613240"


def pkg(name, version, vendor="NVIDIA"):
    return SimpleNamespace(name=name, version=version, vendor=vendor)


def test_driver_version_is_read_as_a_driver_version():
    short, full, listing = driver_from_packages([pkg("esx-base", "8.0.3-0.0.24022510", "VMware"),
                                                 pkg("NVD-AIE_ESXi_8.0.0_Driver", FULL),
                                                 pkg("nvdgpumgmtdaemon", FULL)])
    assert (short, full) == ("550.90.05", FULL)
    assert [p["name"] for p in listing] == ["NVD-AIE_ESXi_8.0.0_Driver", "nvdgpumgmtdaemon"]
    # the short form is the one _esxi gives, whatever the build suffix
    assert short == _esxi.parse_driver_version(full).short


def test_short_and_suffixed_versions():
    assert driver_from_packages([pkg("NVD-AIE-800", "550.90.05")])[:2] == ("550.90.05", "550.90.05")
    assert driver_from_packages([pkg("NVD-AIE-800", " 550.90.05-1OEM.800 ")])[:2] == ("550.90.05", "550.90.05-1OEM.800")


def test_a_package_whose_version_is_no_driver_version_is_not_the_driver():
    # the old split("-") made "8.0.0" of a vendor tool the driver version
    packages = [pkg("nvd-gpu-tools-driver", "8.0.0-1.0"), pkg("NVD-AIE_ESXi_8.0.0_Driver", FULL)]
    assert driver_from_packages(packages)[:2] == ("550.90.05", FULL)
    assert driver_from_packages([pkg("nvd-gpu-tools-driver", "latest")])[:2] == (None, None)
    assert driver_from_packages([])[:2] == (None, None)


class FakeHost(dict):
    moid = "host-1"


def test_host_record_speaks_the_collection_graphics_words():
    config = SimpleNamespace(hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance",
                             deviceType=[SimpleNamespace(deviceId="0000:3b:00.0", graphicsType="shared")])
    pci = SimpleNamespace(id="0000:3b:00.0", vendorId=0x10DE, classId=0x0302, deviceId=0x2330, deviceName="H100")
    host = FakeHost({"name": "esx-01", "runtime.connectionState": "connected", "hardware.pciDevice": [pci],
                     "config.graphicsInfo": [SimpleNamespace(pciId="0000:3b:00.0", graphicsType="sharedDirect",
                                                             memorySizeInKB=80 * 1024 * 1024)]})
    rec = host_record(host, "gpu-h100", config, [])
    assert rec["graphics"] == dict(default_type="shared_direct", assignment_policy="performance",
                                   device_types={"0000:3b:00.0": "shared"})
    assert rec["gpus"][0]["graphics_type"] == "shared" and rec["gpus"][0]["active_graphics_type"] == "shared_direct"
