# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The floor of one vSphere module call, for the benchmarks only (not part of the collection).

Login, one PropertyCollector retrieval of every host and VM (name, PCI devices, virtual devices:
what the GPU modules read) by traversal from the root folder, logout: RetrieveServiceContent,
Login, RetrievePropertiesEx (and ContinueRetrievePropertiesEx per further page), Logout. Connection
from VMWARE_HOST, VMWARE_PORT, VMWARE_USER, VMWARE_PASSWORD and VMWARE_CA_FILE, as the modules take it.
"""
import os
import ssl

from ansible.module_utils.basic import AnsibleModule
from pyVim import connect
from pyVmomi import vim, vmodl


def retrieve(content):
    pc = vmodl.query.PropertyCollector
    to_vm = pc.TraversalSpec(name="hostToVm", type=vim.HostSystem, path="vm", skip=False)
    to_host = pc.TraversalSpec(name="crToHost", type=vim.ComputeResource, path="host", skip=False, selectSet=[to_vm])
    folder = pc.TraversalSpec(name="folder", type=vim.Folder, path="childEntity", skip=False)
    dc_host = pc.TraversalSpec(name="dcToHostFolder", type=vim.Datacenter, path="hostFolder", skip=False,
                               selectSet=[pc.SelectionSpec(name="folder")])
    folder.selectSet = [pc.SelectionSpec(name="folder"), dc_host, to_host]
    spec = pc.FilterSpec(objectSet=[pc.ObjectSpec(obj=content.rootFolder, skip=True, selectSet=[folder])],
                         propSet=[pc.PropertySpec(type=vim.HostSystem, pathSet=["name", "hardware.pciDevice"]),
                                  pc.PropertySpec(type=vim.VirtualMachine, pathSet=["name", "config.hardware.device"])])
    result = content.propertyCollector.RetrievePropertiesEx(specSet=[spec], options=pc.RetrieveOptions())
    objects = 0
    while result is not None:
        objects += len(result.objects or [])
        if not result.token:
            break
        result = content.propertyCollector.ContinueRetrievePropertiesEx(token=result.token)
    return objects


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    ctx = ssl.create_default_context(cafile=os.environ.get("VMWARE_CA_FILE"))
    stub = connect.SmartStubAdapter(host=os.environ["VMWARE_HOST"], port=int(os.environ.get("VMWARE_PORT", 443)),
                                    sslContext=ctx)
    content = vim.ServiceInstance("ServiceInstance", stub).RetrieveContent()
    content.sessionManager.Login(os.environ["VMWARE_USER"], os.environ["VMWARE_PASSWORD"], None)
    try:
        objects = retrieve(content)
    finally:
        content.sessionManager.Logout()
    module.exit_json(changed=False, objects=objects)


if __name__ == "__main__":
    main()
