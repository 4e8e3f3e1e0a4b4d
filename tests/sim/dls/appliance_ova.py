"""A tiny OVF/OVA of our own that stands for the DLS appliance's image in tests (no vendor image).

It has what the real appliance's OVA has in kind: one virtual system with a product section whose
user-configurable properties carry the network settings, one NIC on a named OVF network, one disk
(a valid, empty, streamOptimized VMDK of 16 MiB: header, descriptor, grain directory, footer,
end-of-stream marker), and a SHA-256 manifest. The property keys are ours (the appliance's real
keys are read from its OVF descriptor by the module; nothing here pretends to be them).

    import appliance_ova
    ova = appliance_ova.build(folder)               # folder/nls-test-appliance.ova
    ovf = appliance_ova.build(folder, packed=False) # folder/nls-test-appliance.ovf + .vmdk + .mf

Standard library only.
"""
from __future__ import annotations

import hashlib
import io
import struct
import tarfile
from pathlib import Path

NAME = "nls-test-appliance"
NETWORK = "Appliance Network"
PROPERTIES = {  # key: (type, default, user configurable)
    "appliance.hostname": ("string", "dls-appliance", True),
    "appliance.ip0": ("string", "", True),
    "appliance.netprefix0": ("string", "24", True),
    "appliance.gateway": ("string", "", True),
    "appliance.dns": ("string", "", True),
    "appliance.build": ("string", "test-1", False),
}
SECTOR = 512
CAPACITY_SECTORS = 16 * 1024 * 1024 // SECTOR


def _vmdk() -> bytes:
    """An empty streamOptimized VMDK (no grain holds data, so no grain table is needed)."""
    grain = 128
    gtes = 512
    gd_entries = -(-CAPACITY_SECTORS // (grain * gtes))
    gd_sectors = -(-gd_entries * 4 // SECTOR)
    descriptor = (
        "# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"streamOptimized\"\n\n"
        "RW %d SPARSE \"%s-disk1.vmdk\"\n\nddb.adapterType = \"lsilogic\"\nddb.virtualHWVersion = \"14\"\n"
        % (CAPACITY_SECTORS, NAME)).encode()
    desc_sectors = -(-len(descriptor) // SECTOR)
    overhead = 1 + desc_sectors

    def header(gd_offset):
        head = struct.pack("<4sIIQQQQIQQQBccccH", b"KDMV", 3, 0x30001, CAPACITY_SECTORS, grain, 1, desc_sectors,
                           gtes, 0, gd_offset, overhead, 0, b"\n", b" ", b"\r", b"\n", 1)
        return head.ljust(SECTOR, b"\0")

    def marker(num, kind):
        return struct.pack("<QII", num, 0, kind).ljust(SECTOR, b"\0")

    body = header(0xFFFFFFFFFFFFFFFF) + descriptor.ljust(desc_sectors * SECTOR, b"\0")
    gd_at = len(body) // SECTOR + 1
    body += marker(gd_sectors, 2) + b"\0" * (gd_sectors * SECTOR)  # grain directory: every entry empty
    body += marker(1, 3) + header(gd_at)                             # footer
    body += b"\0" * SECTOR                                           # end of stream
    return body


def descriptor(disk_size: int) -> str:
    props = "\n".join(
        '      <Property ovf:key="%s" ovf:type="%s" ovf:userConfigurable="%s" ovf:value="%s">\n'
        '        <Label>%s</Label>\n      </Property>' % (key, kind, "true" if user else "false", default, key)
        for key, (kind, default, user) in PROPERTIES.items())
    return """<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
  xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
  xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData"
  xmlns:vmw="http://www.vmware.com/schema/ovf">
  <References>
    <File ovf:href="%(name)s-disk1.vmdk" ovf:id="file1" ovf:size="%(size)d"/>
  </References>
  <DiskSection>
    <Info>Virtual disk information</Info>
    <Disk ovf:capacity="16" ovf:capacityAllocationUnits="byte * 2^20" ovf:diskId="vmdisk1" ovf:fileRef="file1"
      ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>
  </DiskSection>
  <NetworkSection>
    <Info>The logical networks used by the package</Info>
    <Network ovf:name="%(network)s">
      <Description>The network the license service answers on</Description>
    </Network>
  </NetworkSection>
  <VirtualSystem ovf:id="%(name)s">
    <Info>A stand-in for a license service appliance (tests)</Info>
    <Name>%(name)s</Name>
    <OperatingSystemSection ovf:id="96" vmw:osType="other4xLinux64Guest">
      <Info>The guest operating system</Info>
    </OperatingSystemSection>
    <ProductSection ovf:required="true">
      <Info>Network settings of the appliance</Info>
      <Product>gpupool.vcf test appliance</Product>
      <Vendor>gpupool.vcf tests</Vendor>
      <Version>1.0</Version>
%(props)s
    </ProductSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemIdentifier>%(name)s</vssd:VirtualSystemIdentifier>
        <vssd:VirtualSystemType>vmx-14</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits>
        <rasd:ElementName>2 virtual CPUs</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>2</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits>
        <rasd:ElementName>1024 MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>1024</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:ElementName>SCSI Controller 0</rasd:ElementName>
        <rasd:InstanceID>3</rasd:InstanceID>
        <rasd:ResourceSubType>lsilogic</rasd:ResourceSubType>
        <rasd:ResourceType>6</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>0</rasd:AddressOnParent>
        <rasd:ElementName>Hard Disk 1</rasd:ElementName>
        <rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource>
        <rasd:InstanceID>4</rasd:InstanceID>
        <rasd:Parent>3</rasd:Parent>
        <rasd:ResourceType>17</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AutomaticAllocation>true</rasd:AutomaticAllocation>
        <rasd:Connection>%(network)s</rasd:Connection>
        <rasd:ElementName>Network adapter 1</rasd:ElementName>
        <rasd:InstanceID>5</rasd:InstanceID>
        <rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType>
        <rasd:ResourceType>10</rasd:ResourceType>
      </Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
""" % dict(name=NAME, size=disk_size, network=NETWORK, props=props)


def build(folder, packed: bool = True) -> Path:
    """Write the appliance image into ``folder``; return the .ova (or the .ovf when not packed)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    disk = _vmdk()
    ovf = descriptor(len(disk)).encode()
    files = {"%s.ovf" % NAME: ovf, "%s-disk1.vmdk" % NAME: disk}
    files["%s.mf" % NAME] = "".join("SHA256(%s)= %s\n" % (n, hashlib.sha256(d).hexdigest())
                                    for n, d in files.items()).encode()
    if not packed:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return folder / ("%s.ovf" % NAME)
    path = folder / ("%s.ova" % NAME)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:  # the descriptor first, as OVA requires
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return path
