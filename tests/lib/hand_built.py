"""A vSphere platform built by hand, for the first-contact tests (discovery, capture, adoption): the
simulator's REST API spoken directly, never through the collection (``Rest``), and ``build_by_rest``,
which makes VM classes and Supervisor namespaces through it as an operator would have
(``platform_and_tenant``: the namespaces of such a platform).
"""
import requests

CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
NAMESPACES = "/api/vcenter/namespaces/instances"


class Rest:
    """The simulator's REST API, spoken directly (not through the collection)."""

    def __init__(self, sim):
        self.base, self.verify = "https://%s:%d" % (sim.host, sim.port), sim.ca_file
        token = requests.post(self.base + "/api/session", auth=(sim.user, sim.password), verify=self.verify,
                              timeout=30).json()
        self.headers = {"vmware-api-session-id": token}

    def call(self, method, path, body=None):
        answer = requests.request(method, self.base + path, json=body, headers=self.headers, verify=self.verify,
                                  timeout=30)
        assert answer.status_code < 300, (method, path, answer.status_code, answer.text)
        return answer.json() if answer.text else None

    def close(self):
        requests.delete(self.base + "/api/session", headers=self.headers, verify=self.verify, timeout=30)


def vgpu_class(cid, cpu, memory_mb, profiles, **fields):
    """The CreateSpec of a VM class with one vGPU device per profile of ``profiles`` (memory reserved in full)."""
    return dict({"id": cid, "cpu_count": cpu, "memory_MB": memory_mb, "memory_reservation": 100,
                 "devices": {"vgpu_devices": [{"profile_name": p} for p in profiles]}}, **fields)


def platform_and_tenant(platform, platform_classes, tenant_classes, tenant_description, **platform_fields):
    """The namespaces of a hand-built platform (CreateSpecs for ``build_by_rest``): ``platform``, the VKS
    cluster's, owned by the group ops, and the tenant team-x with CPU, memory and storage limits, edited by
    the group x-devs."""
    return [
        dict({"namespace": platform, "vm_service_spec": {"vm_classes": list(platform_classes)},
              "storage_specs": [{}],
              "access_list": [{"subject_type": "GROUP", "domain": "vsphere.local", "subject": "ops", "role": "OWNER"}]},
             **platform_fields),
        {"namespace": "team-x", "description": tenant_description,
         "vm_service_spec": {"vm_classes": list(tenant_classes)},
         "storage_specs": [{"limit": 204800}],
         "resource_spec": {"cpu_limit": 20000, "memory_limit": 65536, "storage_request_limit": 204800},
         "access_list": [{"subject_type": "GROUP", "domain": "vsphere.local", "subject": "x-devs", "role": "EDIT"}]},
    ]


def build_by_rest(sim, classes, namespaces, supervisor="ai-a100"):
    """Create the VM classes ``classes`` (CreateSpecs), then the namespaces ``namespaces`` (CreateSpecs
    without a cluster) on the Supervisor of cluster ``supervisor``; a storage spec without a policy gets
    the first storage policy vCenter lists."""
    rest = Rest(sim)
    try:
        moid = dict((c["cluster_name"], c["cluster"])
                    for c in rest.call("GET", "/api/vcenter/namespace-management/clusters"))[supervisor]
        policy = rest.call("GET", "/api/vcenter/storage/policies")[0]["policy"]
        for spec in classes:
            rest.call("POST", CLASSES, spec)
        for spec in namespaces:
            storage = [dict({"policy": policy}, **s) for s in spec.get("storage_specs", [])]
            rest.call("POST", NAMESPACES, dict(spec, cluster=moid, storage_specs=storage))
    finally:
        rest.close()
