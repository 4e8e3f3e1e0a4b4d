"""The vSphere requests of one module call, method by method, against the simulator's counts: a session reads the
service content once; the custom attribute definitions (for the collection's records) come in the retrieval of the
hosts, not in one of their own; a cluster's hosts alone are read by a traversal of the cluster (no container
view to create and destroy); the nvidia module options are queried on the kernel module system the host
retrieval already named (no property read per host); the cluster lookup by name, and any read of every cluster
or host, is one retrieval through the datacenters' host folders (no container view). The expected counts are written out by hand, request by
request, so that a round trip that comes back fails here (the figures: tests/bench/bench_module_floor.py)."""
import collections

import pytest

import vsphere_sim
from tests.lib.ansible_run import run_module

CLUSTER = "rt"
PER_HOST_DRIVER = ("fetchSoftwarePackages", "FetchSoftwarePackages")
# a session: the service content, the login, the logout
SESSION = {"RetrieveServiceContent": 1, "Login": 1, "Logout": 1}
# the lookup of the cluster by name: one retrieval, a traversal of the host folders (no container view)
CLUSTER_LOOKUP = {"RetrievePropertiesEx": 1}


def counted(*parts, **more):
    out = collections.Counter()
    for part in parts + (more,):
        out.update(part)
    return out


def methods(sim):
    stats = sim.stats()
    assert not (stats.get("rest") or {}).get("total"), stats["rest"]
    return collections.Counter(dict((m, n) for m, n in stats["soap"]["methods"].items() if n))


def call(sim, module, args):
    sim.reset_stats()
    res = run_module(module, args, env=sim.env)[0]
    assert not res.get("failed"), res.get("msg")
    return res, methods(sim)


@pytest.fixture(params=[2, 5], ids=["2-hosts", "5-hosts"])
def sim(request):
    with vsphere_sim.start(vsphere_sim.fleet_of(request.param, vms_per_host=2, cluster=CLUSTER)) as running:
        running.hosts = request.param
        yield running


def test_a_client_session_reads_the_service_content_once():
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient
    with vsphere_sim.start(vsphere_sim.fleet_of(1, cluster=CLUSTER)) as one:
        one.reset_stats()
        client = VsphereClient(one.host, one.user, one.password, port=one.port, ca_file=one.ca_file)
        assert methods(one) == {"RetrieveServiceContent": 1, "Login": 1}
        # the kept content's objects answer through the session: the cluster lookup works on them
        assert list(client.clusters_by_name()) == [CLUSTER]
        client.close()
        assert methods(one) == counted(SESSION, CLUSTER_LOOKUP)


def test_gpu_host_info_reads_the_records_definitions_in_the_host_retrieval(sim):
    n = sim.hosts
    res, got = call(sim, "gpupool.vcf.gpu_host_info", {"cluster": CLUSTER, "gather": ["vms"]})
    assert len(res["hosts"]) == n
    # the cluster lookup; the hosts, their VMs and the attribute definitions (one retrieval through a view);
    # the graphics managers' configuration (one retrieval of them all); the hot-migration setting
    assert got == counted(SESSION, CLUSTER_LOOKUP, CreateContainerView=1, RetrievePropertiesEx=2, DestroyView=1,
                          QueryOptions=1), got
    res, got = call(sim, "gpupool.vcf.gpu_host_info", {"cluster": CLUSTER})
    driver = sum(got.pop(m, 0) for m in PER_HOST_DRIVER)
    # the default gather adds the two per-host reads the API has no batch form for, once per GPU host
    assert (driver, got.pop("QueryConfiguredModuleOptionString", 0)) == (n, n), got
    assert got == counted(SESSION, CLUSTER_LOOKUP, CreateContainerView=1, RetrievePropertiesEx=2, DestroyView=1,
                          QueryOptions=1), got


def test_esxi_gpu_config_queries_the_module_options_without_a_property_read_per_host(sim):
    n = sim.hosts
    args = {"cluster": CLUSTER, "scheduler": {"policy": "equal_share"}}
    res, cold = call(sim, "gpupool.vcf.esxi_gpu_config", args)
    assert res["changed"]
    res, warm = call(sim, "gpupool.vcf.esxi_gpu_config", args)
    assert not res["changed"], res
    # the cluster lookup; the cluster's hosts with the attribute definitions (a traversal of the cluster's hosts:
    # no view); the graphics managers' configuration; the nvidia module options of each GPU host on the kernel
    # module system the host retrieval named
    assert warm == counted(SESSION, CLUSTER_LOOKUP, RetrievePropertiesEx=2, QueryConfiguredModuleOptionString=n), warm
    # the cold run writes the options of each host (and its record) on top of the same reads
    assert cold["UpdateModuleOptionString"] == n and cold["QueryConfiguredModuleOptionString"] == n, cold
    assert "Fetch" not in cold and cold["RetrievePropertiesEx"] == warm["RetrievePropertiesEx"], cold


def test_drs_gpu_pinning_reads_once_cold_and_warm(sim):
    res, cold = call(sim, "gpupool.vcf.drs_gpu_pinning", {"cluster": CLUSTER})
    assert res["changed"]
    # the task's state is polled until it ends: once at least, a second time on a slow machine
    polls = cold.pop("Fetch", 0)
    assert polls >= 1, cold
    # the cluster lookup; the cluster, its hosts and VMs with the attribute definitions (one retrieval); the
    # record's definition (first run on this vCenter) and value; one reconfigure for every override
    assert cold == counted(SESSION, CLUSTER_LOOKUP, RetrievePropertiesEx=1, AddCustomFieldDef=1, SetField=1,
                           ReconfigureComputeResource_Task=1), cold
    res, warm = call(sim, "gpupool.vcf.drs_gpu_pinning", {"cluster": CLUSTER})
    assert not res["changed"], res
    assert warm == counted(SESSION, CLUSTER_LOOKUP, RetrievePropertiesEx=1), warm


def test_the_host_folder_traversal_finds_what_a_container_view_finds():
    """Clusters and hosts in a second datacenter, in nested host folders, a standalone host: the one retrieval of the
    whole inventory's clusters or hosts finds each of them once, as a recursive container view of the root folder
    does (the view read here by the test itself, not by the client's code)."""
    from pyVmomi import vim, vmodl
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient
    with vsphere_sim.start(vsphere_sim.fleet_of(2, cluster=CLUSTER)) as one:
        client = VsphereClient(one.host, one.user, one.password, port=one.port, ca_file=one.ca_file)
        try:
            content = client.content
            datacenter = content.rootFolder.CreateFolder("region").CreateDatacenter("dc-rt-2")
            rack = datacenter.hostFolder.CreateFolder("racks").CreateFolder("row-1")
            rack.CreateClusterEx("deep", vim.cluster.ConfigSpecEx())
            client.wait_for_task(rack.AddStandaloneHost_Task(
                spec=vim.host.ConnectSpec(hostName="standalone-1", userName="root", password="x", force=True),
                addConnected=True))
            pc = vmodl.query.PropertyCollector

            def by_view(kind):
                view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
                try:
                    spec = pc.FilterSpec(objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[pc.TraversalSpec(
                        name="v", path="view", type=vim.view.ContainerView)])],
                        propSet=[pc.PropertySpec(type=kind, pathSet=["name"])])
                    got = content.propertyCollector.RetrievePropertiesEx([spec], pc.RetrieveOptions())
                    return sorted(p.val for o in got.objects for p in o.propSet)
                finally:
                    view.DestroyView()

            assert by_view(vim.ClusterComputeResource) == ["deep", CLUSTER]
            assert by_view(vim.HostSystem) == ["esx-01", "esx-02", "standalone-1"]
            one.reset_stats()
            clusters = client.clusters_by_name()
            hosts = client.retrieve({vim.HostSystem: ["name"]}, fields=True)
            assert methods(one) == {"RetrievePropertiesEx": 2}
            assert sorted(clusters) == ["deep", CLUSTER]
            assert sorted(h["name"] for h in hosts) == ["esx-01", "esx-02", "standalone-1"]
            assert all(isinstance(h.obj, vim.HostSystem) for h in hosts)
            assert client.custom_field_key("gpupool.vcf.nothing", vim.HostSystem) is None
            assert methods(one) == {"RetrievePropertiesEx": 2}  # the definitions came with the hosts
            both = client.retrieve({vim.HostSystem: ["name"], vim.ClusterComputeResource: ["name"]})
            assert sorted(o["name"] for o in both) == ["deep", "esx-01", "esx-02", CLUSTER, "standalone-1"]
        finally:
            client.close()
