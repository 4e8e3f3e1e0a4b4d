# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: whether each link of a design can run on a platform, judged from reads only (pure: no I/O).

``gpu_pool_preflight`` reads what a platform has (the vCenter's API version, the account's privileges on
the objects each link changes, the clusters, hosts, datastores, storage policies and Supervisors the
design names, the vLCM image and depots, the Kubernetes APIs, the DLS appliance and Prometheus) and
hands it here as plain data (``live``); :func:`judge` says per link ``go`` (true, false, or None where
the link was not checked) and why not.

``live`` (every key optional; a link whose connection was not given is absent or None)::

    {"vsphere": {"api_version": "8.0.3.0",
                 "clusters": {cluster name: [host names]},
                 "datastores": [datastore names],
                 "privileges": {object label: {privilege id: granted}},
                 "supervisors": [cluster names with a Supervisor] or None (not readable: "supervisor_error"),
                 "supervisor_status": {cluster name: {"config_status": "RUNNING", "kubernetes_status": "READY"}},
                 "storage_policies": [policy names] or None ("storage_policy_error"),
                 "vlcm": {cluster: {"image_managed": bool, "versions": [component versions offered by depots]}}},
     "vks": {"error": text} or {"cluster_classes": [names]} ,
     "guest": {"error": text} or {"crds": [CRD names]},
     "licensing": {"dls": None or an error text, "prometheus": None or an error text}}
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _api_capabilities as caps
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._direct_path import MIN_API as DIRECT_PATH_SINCE
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vm_class import CONFIG_SPEC_SINCE, api_version_tuple

LINKS = ("esxi", "vsphere", "vks", "guest", "licensing")

# HostGraphicsInfoVgpuMode_enum and HostGraphicsConfigDeviceType.vgpuMode came with vSphere API 8.0.3
# (vSphere Web Services API reference, data object HostGraphicsInfo): before it the per-device vGPU mode
# can be neither read (gpu_host_info) nor set (esxi_gpu_config's vgpu_mode)
VGPU_MODE_SINCE = (8, 0, 3)

# What the collection does differently by vCenter API version, each from the code that decides it:
# (feature, first API version, what it means)
FEATURES = (
    ("vm_class_config_spec", CONFIG_SPEC_SINCE,
     "VM classes are written in the config_spec form (vm_class api_form auto; older APIs get the devices form)"),
    ("vgpu_mode", VGPU_MODE_SINCE,
     "the vGPU mode per GPU is read (graphicsInfo.vgpuMode) and set (esxi_gpu_config vgpu_mode)"),
    ("direct_path_devices", DIRECT_PATH_SINCE,
     "the vGPU mode is set through the direct-path-devices API (UpdateGraphicsConfig before it)"),
)

# The privileges each link needs on the objects it changes, by the call that changes them. Privilege ids
# and the calls that need them: vSphere Security guide, "Defined Privileges" (Host configuration, Host
# inventory, Global, Namespaces, VM classes) and the Web Services API reference ("Required privileges" of
# each method); the vLCM image ones: vSphere Lifecycle Manager documentation, "vSphere Lifecycle Manager
# Privileges for Using Images" (Lifecycle Manager: Image Privileges - Write; Image Remediation Privileges -
# Write), whose ids a vCenter lists as VcIntegrity.lifecycleSoftwareSpecification.Write and
# VcIntegrity.lifecycleSoftwareRemediation.Write in its Admin role.
# (link, privilege id, scope, what it is for); scope: the objects it is asked on -
#   gpu_hosts: every host of the design's GPU clusters; gpu_clusters: each GPU cluster;
#   vlcm_clusters: each GPU cluster whose lifecycle is vlcm; supervisor_clusters: each cluster whose
#   Supervisor holds the design's namespaces; root: the vCenter's root folder; gpu_root: the root folder
#   where the vCenter holds GPU clusters of the design; vm_class_root: the root folder where the design
#   has VM classes on this vCenter (the Supervisor's).
PRIVILEGES = (
    ("esxi", "Host.Config.Settings", "gpu_hosts",
     "graphics (UpdateGraphicsConfig) and the nvidia module options (UpdateModuleOptionString)"),
    ("esxi", "Host.Config.Maintenance", "gpu_hosts", "maintenance mode and reboot (EnterMaintenanceMode_Task, RebootHost_Task)"),
    ("esxi", "Host.Config.Patch", "gpu_hosts", "the NVIDIA host driver (InstallHostPatchV2_Task)"),
    ("esxi", "Host.Inventory.EditCluster", "gpu_clusters", "per-VM DRS overrides (ReconfigureComputeResource_Task)"),
    ("esxi", "Global.SetCustomField", "gpu_clusters",
     "the run lease and the record of the DRS overrides, custom attributes of the cluster (SetField)"),
    ("esxi", "Global.ManageCustomFields", "gpu_root", "the definitions of those custom attributes (AddCustomFieldDef)"),
    ("esxi", "VcIntegrity.lifecycleSoftwareSpecification.Write", "vlcm_clusters",
     "the NVIDIA component in the cluster's desired image"),
    ("esxi", "VcIntegrity.lifecycleSoftwareRemediation.Write", "vlcm_clusters", "remediation of the cluster's hosts"),
    ("vsphere", "VirtualMachineClasses.Manage", "vm_class_root", "VM classes with vGPU profiles"),
    ("vsphere", "Namespaces.Manage", "supervisor_clusters", "vSphere Namespaces (VM classes, storage, limits, access)"),
)

NOT_CHECKED = dict(
    esxi="not checked: no vSphere connection (hostname, username, password or VMWARE_HOST...)",
    vsphere="not checked: no vSphere connection (hostname, username, password or VMWARE_HOST...)",
    vks="not checked: no kubeconfig of the Supervisor (supervisor_kubeconfig)",
    guest="not checked: no kubeconfig of the guest cluster (kubeconfig or K8S_AUTH_KUBECONFIG)",
    licensing="not checked: no DLS appliance (dls_host)",
)

KUEUE_CRDS = ("clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")


def api_features(api_version):
    """{feature: {supported, since, what}} for a vCenter of ``api_version`` ('8.0.3.0'); unknown: none supported.
    The vSphere 8 / 9 choices of the clients (``_api_capabilities``) are among them."""
    have = api_version_tuple(api_version) if api_version else ()
    out = caps.table(api_version)
    for name, since, what in FEATURES:
        out[name] = dict(supported=bool(have) and have >= tuple(since), since=".".join(str(n) for n in since), what=what)
    return out


def host_label(name):
    return "host %s" % name


def cluster_label(name):
    return "cluster %s" % name


ROOT_LABEL = "vCenter root folder"


def _gpu_clusters(derived):
    return (derived.get("esxi") or {}).get("clusters") or {}


def supervisor_clusters(derived):
    """The clusters whose Supervisor holds the design's namespaces, in design order."""
    out = []
    for ns in (derived.get("vsphere") or {}).get("namespaces") or []:
        if ns.get("cluster") and ns["cluster"] not in out:
            out.append(ns["cluster"])
    return out


def scope_objects(derived, scope, clusters):
    """The object labels a privilege of ``scope`` is asked on; ``clusters``: {cluster: [host names]} as read."""
    gpu = _gpu_clusters(derived)
    if scope == "root":
        return [ROOT_LABEL]
    if scope == "gpu_root":
        return [ROOT_LABEL] if any(name in (clusters or {}) for name in gpu) else []
    if scope == "vm_class_root":
        return [ROOT_LABEL] if (derived.get("vsphere") or {}).get("vm_classes") else []
    if scope == "gpu_hosts":
        return [host_label(h) for name in gpu for h in sorted((clusters or {}).get(name) or [])]
    if scope == "gpu_clusters":
        return [cluster_label(name) for name in gpu if name in (clusters or {})]
    if scope == "vlcm_clusters":
        return [cluster_label(name) for name, c in gpu.items() if c.get("lifecycle") == "vlcm" and name in (clusters or {})]
    if scope == "supervisor_clusters":
        return [cluster_label(name) for name in supervisor_clusters(derived) if name in (clusters or {})]
    raise ValueError("unknown privilege scope %r" % scope)


def wanted_privileges(derived, clusters):
    """{object label: [privilege ids]} to ask about: every privilege of :data:`PRIVILEGES` on its objects."""
    out = {}
    for _link, priv, scope, _what in PRIVILEGES:
        for label in scope_objects(derived, scope, clusters):
            if priv not in out.setdefault(label, []):
                out[label].append(priv)
    return out


def missing_privileges(derived, clusters, granted):
    """[(link, privilege, [object labels], what)] the account lacks; ``granted``: {object label: {priv: bool}}.
    A privilege not answered for an object counts as missing."""
    out = []
    for link, priv, scope, what in PRIVILEGES:
        lacking = [label for label in scope_objects(derived, scope, clusters)
                   if not (granted or {}).get(label, {}).get(priv)]
        if lacking:
            out.append((link, priv, lacking, what))
    return out


def _objects_text(labels, most=3):
    if len(labels) <= most:
        return ", ".join(labels)
    return "%s and %d more" % (", ".join(labels[:most]), len(labels) - most)


def _bundle_datastore(bundle):
    """'[LocalDS_0] drivers/x.zip' -> 'LocalDS_0'; None for a URL or a path without a datastore."""
    text = (bundle or "").strip()
    if text.startswith("[") and "]" in text:
        return text[1:text.index("]")]
    return None


def _judge_esxi(derived, vs):
    reasons = []
    clusters = vs.get("clusters") or {}
    features = api_features(vs.get("api_version"))
    for name, want in _gpu_clusters(derived).items():
        if name not in clusters:
            reasons.append("cluster %s of the design is not in vCenter (clusters: %s)"
                           % (name, ", ".join(sorted(clusters)) or "none"))
            continue
        have = len(clusters[name] or [])
        if want.get("hosts") and have < want["hosts"]:
            reasons.append("cluster %s has %d host(s), the design counts %d" % (name, have, want["hosts"]))
        if want.get("vgpu_mode") and not features["vgpu_mode"]["supported"]:
            reasons.append("cluster %s sets vgpu_mode %s: it needs vSphere API %s, vCenter has %s"
                           % (name, want["vgpu_mode"], features["vgpu_mode"]["since"], vs.get("api_version")))
        if want.get("lifecycle") == "vlcm":
            reasons += _judge_vlcm(name, want, (vs.get("vlcm") or {}).get(name))
        else:
            ds = _bundle_datastore(want.get("driver_bundle"))
            if ds is not None and ds not in (vs.get("datastores") or []):
                reasons.append("cluster %s: the driver bundle %s is on datastore %s, which vCenter does not have"
                               % (name, want["driver_bundle"], ds))
    return reasons


def _judge_vlcm(name, want, image):
    if image is None:
        return ["cluster %s: its vLCM image could not be read" % name]
    if image.get("error"):
        return ["cluster %s: its vLCM image could not be read: %s" % (name, image["error"])]
    if not image.get("image_managed"):
        return ["cluster %s has lifecycle vlcm in the design but is not managed with a single image" % name]
    version = want.get("driver_version")
    if not want.get("vlcm_depot_url") and version not in (image.get("versions") or []):
        return ["cluster %s: no offline depot offers %s %s and the design names no vlcm_depot_url to import"
                % (name, want.get("component"), version)]
    return []


def _judge_vsphere(derived, vs):
    reasons = []
    clusters = vs.get("clusters") or {}
    names = supervisor_clusters(derived)
    if names:
        supervisors = vs.get("supervisors")
        if supervisors is None:
            reasons.append("the Supervisors could not be read: %s" % (vs.get("supervisor_error") or "no answer"))
        else:
            for name in names:
                if name not in clusters:
                    reasons.append("cluster %s, which holds the design's namespaces, is not in vCenter" % name)
                elif name not in supervisors:
                    reasons.append("cluster %s has no Supervisor (the design's namespaces are on it)" % name)
                else:
                    reasons += _supervisor_state(name, (vs.get("supervisor_status") or {}).get(name) or {})
    wanted = []
    for ns in (derived.get("vsphere") or {}).get("namespaces") or []:
        for sp in ns.get("storage_policies") or []:
            if sp.get("policy") and sp["policy"] not in wanted:
                wanted.append(sp["policy"])
    if wanted:
        policies = vs.get("storage_policies")
        if policies is None:
            reasons.append("the storage policies could not be read: %s" % (vs.get("storage_policy_error") or "no answer"))
        else:
            for policy in wanted:
                if policy not in policies:
                    reasons.append("storage policy %r of the design's namespaces is not in vCenter" % policy)
    return reasons


# namespace_management.Clusters.ConfigStatus (CONFIGURING, REMOVING, RUNNING, ERROR) and KubernetesStatus
# (READY, WARNING, ERROR) of the cluster summary (vSphere Automation API reference,
# GET /api/vcenter/namespace-management/clusters) on 8.x, and on 9.x the same values of
# supervisors_client.Summary.ConfigStatus and Summary.KubernetesStatus (GET .../supervisors/summaries), which
# the 9.1.1.0 bindings name as their replacement: namespaces are served by a RUNNING, READY Supervisor
SUPERVISOR_RUNNING = "RUNNING"
SUPERVISOR_READY = "READY"


def _supervisor_state(name, status):
    out = []
    config, kube = status.get("config_status"), status.get("kubernetes_status")
    if config is not None and config != SUPERVISOR_RUNNING:
        out.append("the Supervisor of cluster %s is %s, not %s" % (name, config, SUPERVISOR_RUNNING))
    if kube is not None and kube != SUPERVISOR_READY:
        out.append("the Kubernetes API of the Supervisor of cluster %s is %s, not %s" % (name, kube, SUPERVISOR_READY))
    return out


def _judge_vks(derived, vks):
    if vks.get("error"):
        return ["the Supervisor's Kubernetes API could not be read: %s" % vks["error"]]
    return ["%s %s: %s" % (kind, name, text) for kind, name, text in vks.get("lacking") or []]


def _kueue_wanted(derived):
    policy = (derived.get("roles") or {}).get("gpu_scheduling_policy") or {}
    return bool(policy.get("gpu_scheduling_policy_kueue"))


def _judge_guest(derived, guest):
    if guest.get("error"):
        return ["the guest cluster's Kubernetes API could not be read: %s" % guest["error"]]
    reasons = []
    if _kueue_wanted(derived):
        crds = guest.get("crds") or []
        lacking = [c for c in KUEUE_CRDS if c not in crds]
        if lacking:
            reasons.append("the design queues gang pools through Kueue, and the guest cluster lacks its CRDs %s "
                           "(install Kueue first)" % ", ".join(lacking))
    return reasons


def _judge_licensing(lic):
    reasons = []
    if lic.get("dls"):
        reasons.append("the DLS appliance: %s" % lic["dls"])
    if lic.get("prometheus"):
        reasons.append("Prometheus: %s" % lic["prometheus"])
    return reasons


def judge(derived, live):
    """{link: {go, status, reasons}}: ``go`` None (status "not checked") where the link had no connection,
    else whether ``reasons`` (what stops it) is empty. The esxi and vsphere links also get the
    privileges they lack, each naming the link, the objects and what it is for."""
    live = live or {}
    vs = live.get("vsphere")
    out = {}
    missing = missing_privileges(derived, (vs or {}).get("clusters"), (vs or {}).get("privileges")) if vs else []
    for link in LINKS:
        state = live.get(link) if link not in ("esxi", "vsphere") else vs
        if state is None:
            out[link] = dict(go=None, status="not checked", reasons=[NOT_CHECKED[link]])
            continue
        if link == "esxi":
            reasons = _judge_esxi(derived, vs)
        elif link == "vsphere":
            reasons = _judge_vsphere(derived, vs)
        elif link == "vks":
            reasons = _judge_vks(derived, state)
        elif link == "guest":
            reasons = _judge_guest(derived, state)
        else:
            reasons = _judge_licensing(state)
        reasons += ["the account lacks privilege %s on %s (%s)" % (priv, _objects_text(objs), what)
                    for owner, priv, objs, what in missing if owner == link]
        out[link] = dict(go=not reasons, status="go" if not reasons else "no-go", reasons=reasons)
    return out


def missing_list(derived, live):
    """The missing privileges as result entries: [{link, privilege, objects, what}]."""
    vs = (live or {}).get("vsphere")
    if not vs:
        return []
    return [dict(link=link, privilege=priv, objects=objs, what=what)
            for link, priv, objs, what in missing_privileges(derived, vs.get("clusters"), vs.get("privileges"))]


VSPHERE_LINKS = ("esxi", "vsphere")


def _vcenter_links(name, result, several):
    """{link: {go, status, reasons}} of the vSphere links of one vCenter's preflight result (registered): a
    failed or skipped task makes them no-go or not checked; with ``several`` each reason names the vCenter."""
    prefix = "vCenter %s: " % name if several else ""
    if result.get("failed"):
        entry = dict(go=False, status="no-go", reasons=[prefix + "its preflight failed: %s" % result.get("msg")])
        return dict((link, dict(entry)) for link in VSPHERE_LINKS)
    links = result.get("links") or {}
    out = {}
    for link in VSPHERE_LINKS:
        entry = links.get(link)
        if result.get("skipped") or entry is None:
            entry = dict(go=None, status="not checked", reasons=[NOT_CHECKED[link]])
        out[link] = dict(go=entry["go"], status=entry["status"], reasons=[prefix + r for r in entry["reasons"]])
    return out


def merge_vcenters(results):
    """One view of the vSphere links from the preflight of each vCenter: ``results`` [(vCenter name, its
    task's result)] in design order. Returns {links, missing, api_versions}: a link is no-go where any
    vCenter's is, not checked where one was not checked (and none is no-go), else go; with several vCenters
    each reason and each missing privilege names its vCenter."""
    several = len(results) > 1
    per = [(name, _vcenter_links(name, result, several), result) for name, result in results]
    links = {}
    for link in VSPHERE_LINKS:
        states = [entry[link]["go"] for _name, entry, _result in per]
        reasons = [r for _name, entry, _result in per for r in entry[link]["reasons"]]
        if False in states:
            go, status = False, "no-go"
            reasons = [r for _name, entry, _result in per if entry[link]["go"] is not True for r in entry[link]["reasons"]]
        elif None in states or not states:
            go, status = None, "not checked"
            reasons = [r for _name, entry, _result in per if entry[link]["go"] is None for r in entry[link]["reasons"]]
        else:
            go, status = True, "go"
        links[link] = dict(go=go, status=status, reasons=reasons)
    missing = []
    for name, _entry, result in per:
        for m in result.get("missing_privileges") or []:
            missing.append(dict(m, vcenter=name))
    versions = dict((name, result.get("api_version")) for name, _entry, result in per if result.get("api_version"))
    return dict(links=links, missing=missing, api_versions=versions)


def is_go(links):
    """No link is no-go (links not checked do not stop it)."""
    return all(v["go"] is not False for v in links.values())


def text_table(links):
    """The go / no-go table as lines: one per link, then one per reason under it."""
    width = max(len(link) for link in LINKS)
    lines = ["%-*s  %s" % (width, "link", "status")]
    for link in LINKS:
        entry = links.get(link)
        if entry is None:
            continue
        lines.append("%-*s  %s" % (width, link, entry["status"]))
        for reason in entry["reasons"]:
            lines.append("%-*s    - %s" % (width, "", reason))
    return lines


def html_report(design_name, links, missing, api_version):
    """The go / no-go table as one HTML page (no timestamps: an unchanged platform gives the same page):
    one row per link with its status and reasons, then the missing privileges with the link that needs each."""
    def esc(value):
        return html.escape("" if value is None else str(value), quote=True)
    rows = []
    for link in LINKS:
        entry = links.get(link)
        if entry is None:
            continue
        reasons = "".join("<li>%s</li>" % esc(r) for r in entry["reasons"])
        rows.append("<tr class=\"%s\"><td>%s</td><td>%s</td><td>%s</td></tr>" % (
            esc(entry["status"].replace(" ", "-")), esc(link), esc(entry["status"]),
            "<ul>%s</ul>" % reasons if reasons else ""))
    by_vcenter = any(m.get("vcenter") for m in missing)
    privs = "".join("<tr>%s<td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
        "<td>%s</td>" % esc(m.get("vcenter")) if by_vcenter else "",
        esc(m["link"]), esc(m["privilege"]), esc(", ".join(m["objects"])), esc(m["what"])) for m in missing)
    verdict = "go" if is_go(links) else "no-go: %s" % ", ".join(k for k in LINKS if (links.get(k) or {}).get("go") is False)
    return "\n".join([
        "<!DOCTYPE html>",
        "<html><head><meta charset=\"utf-8\"><title>GPU pool preflight: %s</title>" % esc(design_name),
        "<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px;vertical-align:top}"
        "tr.no-go{background:#fdd}tr.not-checked{background:#eee}</style></head><body>",
        "<h1>GPU pool preflight: %s</h1>" % esc(design_name),
        "<p>Result: %s. vCenter API version: %s.</p>" % (esc(verdict), esc(api_version or "not read")),
        "<table><tr><th>link</th><th>status</th><th>reasons</th></tr>\n%s\n</table>" % "\n".join(rows),
        "<h2>Missing privileges</h2>",
        ("<table><tr>%s<th>link</th><th>privilege</th><th>objects</th><th>what for</th></tr>\n%s\n</table>" % ("<th>vCenter</th>" if by_vcenter else "", privs))
        if privs else "<p>None.</p>",
        "</body></html>", ""])


__all__ = ["FEATURES", "KUEUE_CRDS", "LINKS", "NOT_CHECKED", "PRIVILEGES", "ROOT_LABEL", "VGPU_MODE_SINCE",
           "VSPHERE_LINKS", "api_features", "cluster_label", "host_label", "html_report", "is_go", "judge", "merge_vcenters",
           "missing_list", "missing_privileges",
           "scope_objects", "supervisor_clusters", "text_table", "wanted_privileges"]
