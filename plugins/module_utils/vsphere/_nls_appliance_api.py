# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DLS appliance's VMs in vSphere (client layer: knows nothing of Ansible; errors are ``VsphereError``).

* :class:`OvfPackage`: an OVF (descriptor beside its files) or an OVA (tar, descriptor first), read
  without unpacking; the disks are streamed from it during the upload;
* :class:`ApplianceSite`: one PropertyCollector retrieval of what the deployment needs (the VMs with
  their ownership record, power state and vApp properties; the cluster with its resource pool and
  configuration; datastores, networks, datacenters; the custom attribute definitions), the OVF
  import the way vSphere does it (``OvfManager.CreateImportSpec``, ``ResourcePool.ImportVApp``, an
  HTTP PUT of each disk to the NFC lease's device URL, ``HttpNfcLeaseProgress``, ``HttpNfcLeaseComplete``),
  power-on, removal of a half-imported VM of our own, and one ``ReconfigureComputeResource_Task`` for
  the anti-affinity rule, the HA restart priorities and the DRS overrides.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client as http_client
import os
import tarfile
import time
from urllib.parse import urlsplit

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nls_appliance import OWNER_FIELD, format_owner, parse_owner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereError,
    VsphereFault,
    VsphereNotFound,
    VsphereTaskError,
    fault_message,
    vim,
    vmodl,
    wait,
)

CHUNK = 1024 * 1024


class OvfPackage:
    """An OVF or OVA on disk: ``descriptor`` (text), ``sha256`` (of the descriptor), ``open(href)``."""

    def __init__(self, path):
        self.path = path
        self.tar = None
        try:
            if path.lower().endswith(".ova"):
                self.tar = tarfile.open(path, "r:")
                names = [m for m in self.tar.getmembers() if m.isfile()]
                ovfs = [m for m in names if m.name.lower().endswith(".ovf")]
                if not ovfs:
                    raise VsphereError("OVA %s holds no .ovf descriptor" % path)
                self.descriptor = self.tar.extractfile(ovfs[0]).read().decode("utf-8")
            else:
                with open(path, "rb") as fh:
                    self.descriptor = fh.read().decode("utf-8")
        except (OSError, tarfile.TarError, UnicodeDecodeError) as exc:
            raise VsphereError("cannot read the appliance image %s: %s" % (path, exc))
        self.sha256 = hashlib.sha256(self.descriptor.encode("utf-8")).hexdigest()

    def open(self, href):
        """(file object, size) of a file the descriptor references."""
        if self.tar is not None:
            try:
                member = self.tar.getmember(href)
            except KeyError:
                raise VsphereError("OVA %s does not hold %s, which its descriptor references" % (self.path, href))
            return self.tar.extractfile(member), member.size
        full = os.path.join(os.path.dirname(os.path.abspath(self.path)), href)
        if os.path.basename(href) != href or not os.path.isfile(full):
            raise VsphereError("%s, referenced by the descriptor, is not a file beside %s" % (href, self.path))
        return open(full, "rb"), os.path.getsize(full)

    def close(self):
        if self.tar is not None:
            self.tar.close()


def _lease_gone(exc):
    """Whether a fault says the import's NFC lease no longer exists (it ended with its session)."""
    return exc.is_a(vmodl.fault.ManagedObjectNotFound) and str(exc.target or "").startswith("HttpNfcLease")


def _vapp_properties(vapp):
    out = {}
    for prop in getattr(vapp, "property", None) or []:
        key = ".".join(p for p in (prop.classId, prop.id, prop.instanceId) if p)
        out[key] = prop.value if prop.value is not None else prop.defaultValue
    return out


class ApplianceSite:
    """The cluster, datastore and network the appliance goes to, and its VMs there."""

    def __init__(self, client, cluster, datastore, network=None, datacenter=None, ssl_context=None):
        self.client = client
        self.cluster_name, self.datastore_name, self.network_name = cluster, datastore, network
        self.datacenter_name = datacenter
        self.ssl_context = ssl_context
        self.cluster = self.pool = self.datastore = self.network = self.folder = None
        self.vm_refs = {}
        self.rule_keys = {}
        self.owner_key = None
        self.uploaded = 0

    def read(self, names):
        """{vms: {name: {moid, owner, power, properties}}, cluster: {rules, das, drs}} in one retrieval."""
        content = self.client.content
        pc = vmodl.query.PropertyCollector
        view = content.viewManager.CreateContainerView(content.rootFolder, [
            vim.VirtualMachine, vim.ClusterComputeResource, vim.Datastore, vim.Network, vim.Datacenter], True)
        try:
            traversal = pc.TraversalSpec(name="view", path="view", skip=False, type=vim.view.ContainerView)
            obj_specs = [pc.ObjectSpec(obj=view, skip=True, selectSet=[traversal])]
            specs = {vim.VirtualMachine: ["name", "customValue", "runtime.powerState", "config.vAppConfig"],
                     vim.ClusterComputeResource: ["name", "resourcePool", "configurationEx"],
                     vim.Datastore: ["name"], vim.Network: ["name"], vim.Datacenter: ["name", "vmFolder"]}
            if content.customFieldsManager is not None:
                obj_specs.append(pc.ObjectSpec(obj=content.customFieldsManager, skip=False))
                specs[vim.CustomFieldsManager] = ["field"]
            objects = self.client.collect(obj_spec_list=obj_specs, specs=specs)
        finally:
            try:
                view.DestroyView()
            except VsphereError:
                pass
        by_type = {}
        for item in objects:
            if isinstance(item.obj, vim.CustomFieldsManager):
                self.client.know_custom_fields(item.get("field"))
                continue
            by_type.setdefault(type(item.obj).__name__.split(".")[-1], []).append(item)
        self.owner_key = self.client.custom_field_key(OWNER_FIELD, vim.VirtualMachine)
        self._place(by_type)
        vms = {}
        wanted = set(names)
        for item in by_type.get("VirtualMachine", []):
            name = item.get("name")
            if name not in wanted:
                continue
            if name in vms:
                raise VsphereError("two VMs are named %s; name the appliance nodes uniquely" % name)
            self.vm_refs[name] = item.obj
            vms[name] = dict(moid=item.moid, power=str(item.get("runtime.powerState")),
                             owner=parse_owner(self.client.custom_value(item.get("customValue"), self.owner_key)),
                             properties=_vapp_properties(item.get("config.vAppConfig")))
        return dict(vms=vms, cluster=self._cluster_settings(by_type))

    def _place(self, by_type):
        def named(kind, name, what):
            found = [i for i in by_type.get(kind, []) if i.get("name") == name]
            if not found:
                raise VsphereNotFound("%s %s not found; %ss: %s" % (what, name, what, ", ".join(
                    sorted(set(i.get("name") for i in by_type.get(kind, [])))) or "none"))
            return found[0]
        cluster = named("ClusterComputeResource", self.cluster_name, "cluster")
        self.cluster, self.pool = cluster.obj, cluster.get("resourcePool")
        self._config = cluster.get("configurationEx")
        self.datastore = named("Datastore", self.datastore_name, "datastore").obj
        if self.network_name:
            self.network = named("Network", self.network_name, "network").obj
        centers = by_type.get("Datacenter", [])
        if self.datacenter_name:
            self.folder = named("Datacenter", self.datacenter_name, "datacenter").get("vmFolder")
        elif len(centers) == 1:
            self.folder = centers[0].get("vmFolder")
        else:
            raise VsphereError("vCenter has %d datacenters (%s): name the appliance's with datacenter" % (
                len(centers), ", ".join(sorted(c.get("name") for c in centers))))

    def _cluster_settings(self, by_type):
        names = dict((i.moid, i.get("name")) for i in by_type.get("VirtualMachine", []))
        config = self._config
        rules, das, drs = {}, {}, {}
        for rule in getattr(config, "rule", None) or []:
            kind = "anti-affinity" if isinstance(rule, vim.cluster.AntiAffinityRuleSpec) else \
                "affinity" if isinstance(rule, vim.cluster.AffinityRuleSpec) else "other"
            rules[rule.name] = dict(key=rule.key, kind=kind, enabled=rule.enabled,
                                    vms=[names.get(v._moId, v._moId) for v in getattr(rule, "vm", None) or []])
        for entry in getattr(config, "dasVmConfig", None) or []:
            priority = getattr(entry.dasSettings, "restartPriority", None) or entry.restartPriority
            das[names.get(entry.key._moId, entry.key._moId)] = priority or "clusterRestartPriority"
        for entry in getattr(config, "drsVmConfig", None) or []:
            drs[names.get(entry.key._moId, entry.key._moId)] = dict(behavior=entry.behavior, enabled=entry.enabled)
        ha = getattr(config, "dasConfig", None)
        drs_config = getattr(config, "drsConfig", None)
        return dict(rules=rules, das=das, drs=drs, ha_enabled=getattr(ha, "enabled", None),
                    drs_enabled=getattr(drs_config, "enabled", None),
                    overrides_enabled=getattr(drs_config, "enableVmBehaviorOverrides", None))

    # -- the import ------------------------------------------------------------------------
    def deploy(self, package, name, properties, role, networks=(), power_on=True, disk_provisioning="thin",
               lease_timeout=1800):
        """Import one node from ``package``; return the VM's moid. The VM is marked ``importing`` as soon as
        it exists and ``deployed`` once the import completed, so a failed import is ours to redeploy.

        An NFC lease belongs to the session that opened it: a session ended during the import
        (``SessionManager.TerminateSession``, an idle timeout) takes the lease with it, and the
        client's boundary logs in again once. The lease is then gone (``ManagedObjectNotFound``):
        the half-imported VM of this import is removed and the import made once more in the new
        session. A second loss fails, saying so; a rerun redeploys the half-imported VM.
        """
        relogins = self.client.relogins
        args = (package, name, properties, role, networks, power_on, disk_provisioning, lease_timeout)
        try:
            return self._deploy(*args)
        except VsphereFault as exc:
            if not (_lease_gone(exc) and self.client.relogins > relogins):
                raise
            lost = exc
        self._remove_half_imported(name)
        try:
            return self._deploy(*args)
        except VsphereFault as exc:
            if not _lease_gone(exc):
                raise
            raise VsphereError("the import lease of %s ended with its vCenter session twice (%s, then %s); the "
                               "half-imported VM is left, marked as ours: a plain rerun removes it and imports again"
                               % (name, lost, exc))

    def _remove_half_imported(self, name):
        """Remove the VM named ``name`` in the site's resource pool that a lost import left (off, unmarked
        or marked importing: the import created it, since the name was free when it began)."""
        self.vm_refs.pop(name, None)
        for vm in self.client.retrieve({vim.VirtualMachine: ["name", "resourcePool", "runtime.powerState"]}):
            if vm["name"] != name or vm.get("resourcePool") != self.pool:
                continue
            if str(vm.get("runtime.powerState")) == "poweredOn":
                raise VsphereError("VM %s is powered on: not the half-imported VM of a lost import lease" % name)
            self.client.wait_for_task(vm.obj.Destroy_Task(), what="removal of the half-imported %s" % name)

    def _deploy(self, package, name, properties, role, networks, power_on, disk_provisioning, lease_timeout):
        manager = self.client.content.ovfManager
        params = vim.OvfManager.CreateImportSpecParams(
            entityName=name, diskProvisioning=disk_provisioning,
            propertyMapping=[vim.KeyValue(key=k, value=str(v)) for k, v in sorted((properties or {}).items())])
        if self.network is not None:
            params.networkMapping = [vim.OvfManager.NetworkMapping(name=n, network=self.network)
                                     for n in networks]
        result = manager.CreateImportSpec(ovfDescriptor=package.descriptor, resourcePool=self.pool,
                                          datastore=self.datastore, cisp=params)
        errors = [fault_message(e) for e in getattr(result, "error", None) or []]
        if errors:
            raise VsphereError("vCenter refuses the OVF descriptor of %s: %s" % (package.path, "; ".join(errors)))
        lease = self.pool.ImportVApp(spec=result.importSpec, folder=self.folder)
        state = wait(lambda: (lease.state != "initializing", lease.state), 300, "the import lease of %s" % name)
        if state != "ready":
            raise VsphereTaskError("the import of %s failed: %s" % (name, fault_message(getattr(lease, "error", None))))
        info = lease.info
        vm = info.entity
        self.vm_refs[name] = vm
        try:
            self.client.set_custom_field(vm, OWNER_FIELD, format_owner("importing", package.sha256, role))
            self._upload(package, result.fileItem or [], info, lease, lease_timeout)
            lease.HttpNfcLeaseComplete()
        except Exception:
            try:
                lease.HttpNfcLeaseAbort()
            except VsphereError:
                pass
            raise
        self.client.set_custom_field(vm, OWNER_FIELD, format_owner("deployed", package.sha256, role))
        if power_on:
            self.power_on(name)
        return vm._moId

    def _upload(self, package, items, info, lease, lease_timeout):
        urls = dict((u.importKey, u.url) for u in info.deviceUrl or [])
        total = sum(int(i.size or 0) for i in items) or 1
        done = 0
        started = time.monotonic()
        for item in items:
            url = urls.get(item.deviceId)
            if url is None:
                raise VsphereError("the import lease offers no device URL for %s (%s)" % (item.deviceId, item.path))
            src, size = package.open(item.path)
            try:
                done = self._put(url, src, size, lease, done, total, started, lease_timeout)
            finally:
                src.close()
        lease.HttpNfcLeaseProgress(percent=100)

    def _put(self, url, src, size, lease, done, total, started, timeout):
        parts = urlsplit(url)
        host = parts.hostname if parts.hostname not in ("*", None) else self.client.hostname
        conn = http_client.HTTPSConnection(host, parts.port or 443, context=self.ssl_context, timeout=300)
        last = time.monotonic()
        try:
            conn.putrequest("PUT", parts.path + ("?" + parts.query if parts.query else ""))
            conn.putheader("Content-Type", "application/x-vnd.vmware-streamVmdk")
            conn.putheader("Content-Length", str(size))
            conn.endheaders()
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                conn.send(chunk)
                done += len(chunk)
                self.uploaded += len(chunk)
                if time.monotonic() - last > 10:  # keep the lease alive: vSphere ends an idle one
                    lease.HttpNfcLeaseProgress(percent=min(99, int(done * 100 / total)))
                    last = time.monotonic()
                if time.monotonic() - started > timeout:
                    raise VsphereTaskError("the disk upload took longer than %d s" % timeout)
            answer = conn.getresponse()
            answer.read()
            if answer.status not in (200, 201):
                raise VsphereError("the upload of a disk to %s answered %s %s" % (host, answer.status, answer.reason))
        except (OSError, http_client.HTTPException) as exc:
            raise VsphereError("the upload of a disk to %s failed: %s" % (host, exc))
        finally:
            conn.close()
        return done

    # -- after the import ------------------------------------------------------------------
    def power_on(self, name):
        vm = self.vm_refs[name]
        self.client.wait_for_task(vm.PowerOnVM_Task(), what="power-on of %s" % name)

    def remove(self, name):
        """Remove a half-imported VM of our own (powered off first)."""
        vm = self.vm_refs[name]
        if str(vm.runtime.powerState) == "poweredOn":
            self.client.wait_for_task(vm.PowerOffVM_Task(), what="power-off of %s" % name)
        self.client.wait_for_task(vm.Destroy_Task(), what="removal of %s" % name)
        del self.vm_refs[name]

    def reconfigure(self, plan, rule_name, restart_priority, drs_behavior):
        """The cluster plan of ``_nls_appliance.cluster_plan`` as one ReconfigureComputeResource_Task."""
        spec = vim.cluster.ConfigSpecEx()
        if plan["rule"] is not None:
            op, key, names = plan["rule"]
            info = vim.cluster.AntiAffinityRuleSpec(name=rule_name, enabled=True, mandatory=False,
                                                    vm=[self.vm_refs[n] for n in names])
            if key is not None:
                info.key = key
            spec.rulesSpec = [vim.cluster.RuleSpec(operation=op, info=info)]
        spec.dasVmConfigSpec = [vim.cluster.DasVmConfigSpec(operation=op, info=vim.cluster.DasVmConfigInfo(
            key=self.vm_refs[name], dasSettings=vim.cluster.DasVmSettings(restartPriority=restart_priority)))
            for op, name in plan["das"]]
        spec.drsVmConfigSpec = [vim.cluster.DrsVmConfigSpec(operation=op, info=vim.cluster.DrsVmConfigInfo(
            key=self.vm_refs[name], enabled=True, behavior=drs_behavior)) for op, name in plan["drs"]]
        task = self.cluster.ReconfigureComputeResource_Task(spec=spec, modify=True)
        self.client.wait_for_task(task, what="reconfigure of cluster %s" % self.cluster_name)


__all__ = ["ApplianceSite", "OvfPackage"]
