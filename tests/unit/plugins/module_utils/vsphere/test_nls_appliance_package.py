"""The appliance image as the import reads it: an OVA (tar) or an OVF with its files beside it."""
import hashlib
import sys
import tarfile
from pathlib import Path

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._nls_appliance_api import OvfPackage
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError

sys.path.insert(0, str(Path(__file__).resolve().parents[5] / "tests" / "sim" / "dls"))
import appliance_ova  # noqa: E402  pylint: disable=wrong-import-position

DISK = "%s-disk1.vmdk" % appliance_ova.NAME


@pytest.mark.parametrize("packed", [True, False])
def test_package_reads_descriptor_and_streams_the_disk(tmp_path, packed):
    package = OvfPackage(str(appliance_ova.build(tmp_path, packed=packed)))
    try:
        assert "<VirtualSystem ovf:id=\"%s\">" % appliance_ova.NAME in package.descriptor
        assert package.sha256 == hashlib.sha256(package.descriptor.encode()).hexdigest()
        src, size = package.open(DISK)
        data = src.read()
        src.close()
        assert size == len(data) and data[:4] == b"KDMV" and len(data) % 512 == 0
    finally:
        package.close()


def test_the_manifest_matches(tmp_path):
    appliance_ova.build(tmp_path, packed=False)
    for line in (tmp_path / ("%s.mf" % appliance_ova.NAME)).read_text().splitlines():
        name, digest = line[len("SHA256("):].split(")= ")
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest


def test_a_file_outside_the_folder_or_missing_is_refused(tmp_path):
    package = OvfPackage(str(appliance_ova.build(tmp_path, packed=False)))
    with pytest.raises(VsphereError, match="is not a file beside"):
        package.open("../etc/passwd")
    (tmp_path / DISK).unlink()
    with pytest.raises(VsphereError, match="is not a file beside"):
        package.open(DISK)


def test_an_ova_without_descriptor_or_disk(tmp_path):
    empty = tmp_path / "empty.ova"
    with tarfile.open(empty, "w") as tar:
        info = tarfile.TarInfo("readme.txt")
        tar.addfile(info)
    with pytest.raises(VsphereError, match="holds no .ovf descriptor"):
        OvfPackage(str(empty))
    ova = appliance_ova.build(tmp_path)
    package = OvfPackage(str(ova))
    with pytest.raises(VsphereError, match="does not hold other.vmdk"):
        package.open("other.vmdk")
    package.close()
    with pytest.raises(VsphereError, match="cannot read the appliance image"):
        OvfPackage(str(tmp_path / "missing.ova"))
