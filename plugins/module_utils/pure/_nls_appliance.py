# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DLS appliance as the collection sets it up (pure: no I/O).

* :func:`parse_ovf`: what an OVF descriptor declares (properties with their qualified keys,
  networks, disks) - the appliance's own property keys are read from its image, never assumed;
* :func:`deploy_plan`: which appliance VMs to import, redeploy (a broken import of our own),
  power on, or refuse (a VM of that name the collection did not deploy);
* :func:`cluster_plan`: the HA pair's cluster settings - a VM anti-affinity rule, HA restart
  priority and a per-VM DRS override for each node - as one reconfigure;
* :func:`appliance_state`: what the appliance's REST API said (service instance, HA nodes and
  their health, license server), with the manual step where the license server is missing.

The record of ownership is the VM's custom attribute :data:`OWNER_FIELD`
(``state=<importing|deployed>;ovf=<sha256 prefix>;role=<primary|secondary>``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from xml.etree import ElementTree

OWNER_FIELD = "gpupool.vcf.nls-appliance"
OVF_NS = "http://schemas.dmtf.org/ovf/envelope/1"
RESTART_PRIORITIES = ("lowest", "low", "medium", "high", "highest")
DRS_BEHAVIORS = ("manual", "partiallyAutomated")
ROLES = ("primary", "secondary")
# keys of a node entry that may carry its health; the public description of the API names none
HEALTH_KEYS = ("status", "health", "node_status", "state")
HEALTHY = ("online", "active", "healthy", "up", "running", "ok", "ready")
MANUAL_STEP = (
    "install the license server on the appliance by hand: in the NVIDIA Licensing Portal create a license "
    "server with the licenses for the GPU pool, bind it to this appliance's service instance (upload the DLS "
    "instance token from the appliance, or pick the registered service instance), download the license server "
    "file, and install it in the appliance's web interface (Service Instance, Install License Server). "
    "NVIDIA publishes no API for this step, so the collection cannot do it; rerun once it is done")


class OvfError(ValueError):
    """The OVF descriptor cannot be used; nothing was changed."""


def _attr(elem, name):
    return elem.get("{%s}%s" % (OVF_NS, name), elem.get(name))


def parse_ovf(text):
    """What an OVF descriptor declares: {name, properties: {qualified key: {type, default, user_configurable,
    label}}, networks: [names], disks: number, files: [hrefs]}.

    The qualified key is OVF's ``<class>.<key>.<instance>`` (class and instance only where the product
    section names them): the key vSphere's CreateImportSpec propertyMapping expects."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise OvfError("the OVF descriptor is not XML: %s" % exc)
    if root.tag != "{%s}Envelope" % OVF_NS:
        raise OvfError("the OVF descriptor's root is %s, not an OVF 1.x Envelope" % root.tag)
    systems = root.findall("{%s}VirtualSystem" % OVF_NS)
    if len(systems) != 1:
        raise OvfError("the OVF descriptor holds %d virtual systems; an appliance image holds one" % len(systems))
    system = systems[0]
    props = {}
    for product in system.findall("{%s}ProductSection" % OVF_NS):
        klass, instance = _attr(product, "class"), _attr(product, "instance")
        for prop in product.iter("{%s}Property" % OVF_NS):
            key = ".".join(p for p in (klass, _attr(prop, "key"), instance) if p)
            label = prop.find("{%s}Label" % OVF_NS)
            props[key] = dict(type=_attr(prop, "type") or "string", default=_attr(prop, "value"),
                              user_configurable=(_attr(prop, "userConfigurable") or "false").lower() == "true",
                              label=label.text.strip() if label is not None and label.text else key)
    networks = [_attr(n, "name") for n in root.iter("{%s}Network" % OVF_NS)]
    files = [_attr(f, "href") for f in root.iter("{%s}File" % OVF_NS)]
    disks = len(list(root.iter("{%s}Disk" % OVF_NS)))
    return dict(name=_attr(system, "id"), properties=props, networks=networks, disks=disks, files=files)


def property_errors(ovf, wanted):
    """Sentences for properties the image does not declare or that are not user-configurable."""
    out = []
    declared = ovf["properties"]
    for key in sorted(wanted or {}):
        if key not in declared:
            out.append("OVF property %s is not declared by the image (it declares: %s)" % (
                key, ", ".join(sorted(k for k, v in declared.items() if v["user_configurable"])) or "none"))
        elif not declared[key]["user_configurable"]:
            out.append("OVF property %s is not user-configurable in the image" % key)
    return out


def format_owner(state, ovf_sha256, role):
    return "state=%s;ovf=%s;role=%s" % (state, (ovf_sha256 or "")[:16], role)


def parse_owner(value):
    """The record of a VM's custom attribute as a dict (empty: not deployed by the collection)."""
    out = {}
    for part in (value or "").split(";"):
        if "=" in part:
            key, val = part.split("=", 1)
            out[key.strip()] = val.strip()
    return out if out.get("state") else {}


def node_roles(nodes):
    """Each wanted node with its role: the first is the primary, a second the secondary."""
    return [dict(node, role=ROLES[i]) for i, node in enumerate(nodes)]


def deploy_plan(nodes, vms, power_on=True):
    """What to do per wanted node.

    ``nodes``: [{name, properties, role}]; ``vms``: {name: {owner: dict, power: str, properties: {key: value}}}
    of the VMs of those names. Returns {"actions": [(name, action)], "refused": [sentences], "drift": [sentences]}
    with action ``import`` (none of that name), ``redeploy`` (ours, left half-imported), ``power_on``,
    ``keep``. A VM the collection did not deploy is refused, never replaced; OVF properties of a
    deployed node are not redeployed when they differ: the difference is reported (``drift``)."""
    out = dict(actions=[], refused=[], drift=[])
    for node in nodes:
        name = node["name"]
        vm = vms.get(name)
        if vm is None:
            out["actions"].append((name, "import"))
            continue
        owner = vm.get("owner") or {}
        if not owner:
            out["refused"].append(
                "a VM named %s exists that the collection did not deploy (no %s attribute): it is left alone; "
                "rename or remove it, or give another node name" % (name, OWNER_FIELD))
            continue
        if owner.get("state") != "deployed":
            out["actions"].append((name, "redeploy"))
            continue
        live = vm.get("properties") or {}
        for key in sorted(node.get("properties") or {}):
            want = str(node["properties"][key])
            if (live.get(key) or "") != want:
                out["drift"].append("%s: OVF property %s is %r, the variables say %r (a deployed appliance keeps its "
                                    "settings: change them in its web interface, or remove the VM to redeploy)"
                                    % (name, key, live.get(key), want))
        if power_on and vm.get("power") != "poweredOn":
            out["actions"].append((name, "power_on"))
        else:
            out["actions"].append((name, "keep"))
    return out


def cluster_plan(names, live, rule_name=None, restart_priority="high", drs_behavior="partiallyAutomated"):
    """The cluster settings of the appliance nodes, as one reconfigure.

    ``names``: the node VM names; ``live``: {"rules": {name: {key, vms: [names], kind, enabled}},
    "das": {vm name: restart priority}, "drs": {vm name: {behavior, enabled}}}. ``rule_name``: the VM
    anti-affinity rule of the pair (None: no rule, as for a single node). Returns
    {"rule": None | ("add"|"edit", key or None, [vm names]), "das": [(op, vm)], "drs": [(op, vm)],
    "changes": [(object, field, before, after)]}."""
    out = dict(rule=None, das=[], drs=[], changes=[])
    if rule_name:
        rule = (live.get("rules") or {}).get(rule_name)
        want = sorted(names)
        if rule is None:
            out["rule"] = ("add", None, want)
            out["changes"].append(("rule %s" % rule_name, "vms", None, want))
        elif rule.get("kind") != "anti-affinity" or sorted(rule.get("vms") or []) != want or rule.get("enabled") is False:
            out["rule"] = ("edit", rule.get("key"), want)
            before = dict(kind=rule.get("kind"), vms=sorted(rule.get("vms") or []), enabled=rule.get("enabled"))
            out["changes"].append(("rule %s" % rule_name, "vms", before, want))
    for name in names:
        das = (live.get("das") or {}).get(name, "absent")
        if restart_priority and das != restart_priority:
            out["das"].append(("add" if das == "absent" else "edit", name))
            out["changes"].append(("vm %s" % name, "ha_restart_priority", None if das == "absent" else das,
                                   restart_priority))
        drs = (live.get("drs") or {}).get(name)
        if drs_behavior and (drs is None or drs.get("behavior") != drs_behavior or drs.get("enabled") is False):
            out["drs"].append(("add" if drs is None else "edit", name))
            out["changes"].append(("vm %s" % name, "drs_behavior", None if drs is None else drs.get("behavior"),
                                   drs_behavior))
    return out


def node_health(node):
    """(health, raw): ``healthy``, ``unhealthy`` or ``unknown`` from the first health key the node entry has."""
    for key in HEALTH_KEYS:
        value = node.get(key)
        if value not in (None, ""):
            text = str(value)
            return ("healthy" if text.lower() in HEALTHY else "unhealthy"), text
    return "unknown", None


def ha_nodes(service_instance):
    """The HA node list of a service instance answer, each with its health."""
    nodes = (((service_instance or {}).get("high_availability_config") or {}).get("config") or {}).get("nodeList") or []
    out = []
    for node in nodes:
        health, raw = node_health(node)
        out.append(dict(node_id=node.get("node_id"), fqdn=node.get("fqdn"), address=node.get("network_location"),
                        role=node.get("role"), health=health, status=raw))
    return out


def appliance_state(read, expect_nodes=None):
    """Judge what the appliance said (``read``: the dict of ``_appliance.read_appliance``).

    Returns {ready, license_server_installed, nodes, problems: [sentences], next_step}. ``ready`` is true when
    the appliance answered, its service instance lists the expected nodes, every node with a health is
    healthy and a license server is installed."""
    problems = []
    next_step = None
    nodes = ha_nodes(read.get("service_instance"))
    installed = bool(read.get("license_server"))
    if read.get("error") and (read.get("transient") or read.get("stage") not in ("license_server", "leases")):
        problems.append("the appliance %s does not answer at %s: %s" % (read.get("where"), read.get("stage"), read["error"]))
        next_step = ("check that the appliance VM runs and its service is up (the first boot takes minutes), the "
                     "network path and the credentials, then rerun")
        return dict(ready=False, license_server_installed=None, nodes=nodes, problems=problems, next_step=next_step)
    if expect_nodes and len(nodes) != expect_nodes:
        problems.append("the service instance lists %d node(s), %d expected%s" % (
            len(nodes), expect_nodes, " (configure the HA cluster in the appliance's web interface: Service "
                                      "Instance, Configure High Availability, with the second node's address)"
            if expect_nodes == 2 else ""))
    for node in nodes:
        if node["health"] == "unhealthy":
            problems.append("HA node %s (%s, %s) is %s" % (
                node["fqdn"] or node["address"], node["role"], node["node_id"], node["status"]))
    if read.get("error") and read.get("stage") == "leases":
        problems.append("the leases of license server %s cannot be read: %s" % (read.get("license_server"), read["error"]))
    if not installed:
        problems.append("no license server is installed on the service instance (%s)" % (
            read.get("error") or "the user's scope names none"))
        next_step = MANUAL_STEP
    return dict(ready=not problems, license_server_installed=installed, nodes=nodes, problems=problems,
                next_step=next_step)


__all__ = ["DRS_BEHAVIORS", "MANUAL_STEP", "OWNER_FIELD", "RESTART_PRIORITIES", "OvfError", "appliance_state",
           "cluster_plan", "deploy_plan", "format_owner", "ha_nodes", "node_health", "node_roles", "parse_ovf",
           "parse_owner", "property_errors"]
