"""Unit tests of the preflight's judgements (pure/_preflight.py)."""
import copy
import html.parser as html_parser
import pathlib

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _preflight as pf
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
CLUSTERS = {"gpu-h100": ["esx-h100-0%d" % i for i in range(1, 5)], "gpu-l40s": ["esx-l40s-0%d" % i for i in range(1, 4)]}


def all_granted(derived=None):
    """Every privilege the preflight asks on the example platform (of ``derived``, the example's by default), granted."""
    wanted = pf.wanted_privileges(DERIVED if derived is None else derived, CLUSTERS)
    return dict((label, dict((p, True) for p in privs)) for label, privs in wanted.items())


def platform(derived=None, **changes):
    vs = dict(api_version="8.0.3.0", clusters=copy.deepcopy(CLUSTERS), datastores=["LocalDS_0"],
              privileges=all_granted(derived), supervisors=["gpu-h100"], storage_policies=["vSAN Default Storage Policy"],
              vlcm={})
    vs.update(changes)
    return {"vsphere": vs}


def test_example_platform_is_go_and_other_links_not_checked():
    links = pf.judge(DERIVED, platform())
    assert links["esxi"] == dict(go=True, status="go", reasons=[])
    assert links["vsphere"] == dict(go=True, status="go", reasons=[])
    for link in ("vks", "guest", "licensing"):
        assert links[link]["go"] is None and links[link]["status"] == "not checked"
        assert links[link]["reasons"][0].startswith("not checked: no ")
    assert pf.is_go(links)


def test_no_vsphere_connection():
    links = pf.judge(DERIVED, {})
    assert links["esxi"]["go"] is None and links["vsphere"]["go"] is None
    assert pf.missing_list(DERIVED, {}) == []


def test_missing_privilege_named_with_its_link_and_objects():
    granted = all_granted()
    granted["host esx-h100-02"]["Host.Config.Patch"] = False
    del granted["cluster gpu-h100"]["Namespaces.Manage"]  # not answered counts as missing
    live = platform(privileges=granted)
    links = pf.judge(DERIVED, live)
    assert links["esxi"]["go"] is False
    assert links["esxi"]["reasons"] == [
        "the account lacks privilege Host.Config.Patch on host esx-h100-02 (the NVIDIA host driver (InstallHostPatchV2_Task))"]
    assert links["vsphere"]["go"] is False
    assert "Namespaces.Manage on cluster gpu-h100" in links["vsphere"]["reasons"][0]
    assert pf.missing_list(DERIVED, live) == [
        dict(link="esxi", privilege="Host.Config.Patch", objects=["host esx-h100-02"],
             what="the NVIDIA host driver (InstallHostPatchV2_Task)"),
        dict(link="vsphere", privilege="Namespaces.Manage", objects=["cluster gpu-h100"],
             what="vSphere Namespaces (VM classes, storage, limits, access)")]
    assert not pf.is_go(links)


def test_privileges_asked_on_the_right_objects():
    wanted = pf.wanted_privileges(DERIVED, CLUSTERS)
    assert wanted[pf.ROOT_LABEL] == ["Global.ManageCustomFields", "VirtualMachineClasses.Manage"]
    assert wanted["host esx-l40s-03"] == ["Host.Config.Settings", "Host.Config.Maintenance", "Host.Config.Patch"]
    assert wanted["cluster gpu-h100"] == ["Host.Inventory.EditCluster", "Global.SetCustomField", "Namespaces.Manage"]
    # no namespace, no vlcm lifecycle
    assert wanted["cluster gpu-l40s"] == ["Host.Inventory.EditCluster", "Global.SetCustomField"]
    vlcm = copy.deepcopy(DERIVED)
    vlcm["esxi"]["clusters"]["gpu-l40s"]["lifecycle"] = "vlcm"
    assert pf.wanted_privileges(vlcm, CLUSTERS)["cluster gpu-l40s"][2:] == [
        "VcIntegrity.lifecycleSoftwareSpecification.Write", "VcIntegrity.lifecycleSoftwareRemediation.Write"]


def test_many_objects_shortened():
    granted = all_granted()
    for h in CLUSTERS["gpu-h100"]:
        granted["host %s" % h]["Host.Config.Maintenance"] = False
    reasons = pf.judge(DERIVED, platform(privileges=granted))["esxi"]["reasons"]
    assert "host esx-h100-01, host esx-h100-02, host esx-h100-03 and 1 more" in reasons[0]


def test_missing_cluster_and_hosts():
    clusters = {"gpu-h100": CLUSTERS["gpu-h100"][:3], "mgmt": []}
    reasons = pf.judge(DERIVED, platform(clusters=clusters))["esxi"]["reasons"]
    assert "cluster gpu-h100 has 3 host(s), the design counts 4" in reasons
    assert "cluster gpu-l40s of the design is not in vCenter (clusters: gpu-h100, mgmt)" in reasons


def test_driver_bundle_datastore_missing():
    reasons = pf.judge(DERIVED, platform(datastores=["other"]))["esxi"]["reasons"]
    assert len(reasons) == 2 and "datastore LocalDS_0, which vCenter does not have" in reasons[0]


def test_vgpu_mode_needs_api_8_0_3():
    d = copy.deepcopy(DERIVED)
    d["esxi"]["clusters"]["gpu-l40s"]["vgpu_mode"] = "mixed_size"
    assert pf.judge(d, platform())["esxi"]["go"] is True
    reasons = pf.judge(d, platform(api_version="8.0.2.0"))["esxi"]["reasons"]
    assert reasons == ["cluster gpu-l40s sets vgpu_mode mixed_size: it needs vSphere API 8.0.3, vCenter has 8.0.2.0"]


def test_vlcm_image_and_depot():
    d = copy.deepcopy(DERIVED)
    c = d["esxi"]["clusters"]["gpu-l40s"]
    c["lifecycle"] = "vlcm"
    # the vlcm privileges are asked too: granted here (test_privileges_asked_on_the_right_objects)
    assert pf.judge(d, platform(derived=d))["esxi"]["reasons"] == ["cluster gpu-l40s: its vLCM image could not be read"]
    live = platform(derived=d, vlcm={"gpu-l40s": dict(image_managed=False)})
    assert "not managed with a single image" in pf.judge(d, live)["esxi"]["reasons"][0]
    live = platform(derived=d, vlcm={"gpu-l40s": dict(image_managed=True, versions=["1.0"])})
    assert "no offline depot offers NVD-AIE-800 %s" % c["driver_version"] in pf.judge(d, live)["esxi"]["reasons"][0]
    live = platform(derived=d, vlcm={"gpu-l40s": dict(image_managed=True, versions=[c["driver_version"]])})
    assert pf.judge(d, live)["esxi"]["go"] is True
    c["vlcm_depot_url"] = "https://depot.example.com/nvd.zip"  # imported by the converge
    live = platform(derived=d, vlcm={"gpu-l40s": dict(image_managed=True, versions=[])})
    assert pf.judge(d, live)["esxi"]["go"] is True
    live = platform(derived=d, vlcm={"gpu-l40s": dict(error="503")})
    assert pf.judge(d, live)["esxi"]["reasons"] == ["cluster gpu-l40s: its vLCM image could not be read: 503"]


def test_supervisor_and_storage_policy():
    links = pf.judge(DERIVED, platform(supervisors=[], storage_policies=["gold"]))
    assert links["vsphere"]["reasons"] == [
        "cluster gpu-h100 has no Supervisor (the design's namespaces are on it)",
        "storage policy 'vSAN Default Storage Policy' of the design's namespaces is not in vCenter"]
    links = pf.judge(DERIVED, platform(supervisors=None, supervisor_error="404", storage_policies=None))
    assert links["vsphere"]["reasons"][0] == "the Supervisors could not be read: 404"
    assert links["vsphere"]["reasons"][1] == "the storage policies could not be read: no answer"
    clusters = {"gpu-l40s": CLUSTERS["gpu-l40s"]}
    reasons = pf.judge(DERIVED, platform(clusters=clusters))["vsphere"]["reasons"]
    assert reasons == ["cluster gpu-h100, which holds the design's namespaces, is not in vCenter"]


def test_supervisor_not_running_or_not_ready():
    live = platform(supervisor_status={"gpu-h100": dict(config_status="RUNNING", kubernetes_status="READY")})
    assert pf.judge(DERIVED, live)["vsphere"]["go"] is True
    live = platform(supervisor_status={"gpu-h100": dict(config_status="CONFIGURING", kubernetes_status="WARNING")})
    assert pf.judge(DERIVED, live)["vsphere"]["reasons"] == [
        "the Supervisor of cluster gpu-h100 is CONFIGURING, not RUNNING",
        "the Kubernetes API of the Supervisor of cluster gpu-h100 is WARNING, not READY"]


def test_api_features():
    f = pf.api_features("8.0.3.0")
    assert f["vm_class_config_spec"]["supported"] and f["vgpu_mode"]["supported"]
    assert not f["direct_path_devices"]["supported"] and f["direct_path_devices"]["since"] == "9.1"
    assert pf.api_features("9.1.0.0")["direct_path_devices"]["supported"]
    assert not pf.api_features("8.0.1.0")["vm_class_config_spec"]["supported"]
    assert not any(v["supported"] for v in pf.api_features(None).values())


def test_vks_guest_licensing():
    live = platform()
    live["vks"] = dict(lacking=[("VKS cluster", "gpu-platform/gpu-workloads", "not on the Supervisor")])
    live["guest"] = dict(crds=[])
    live["licensing"] = dict(dls="DLS appliance unreachable at dls:443 (refused)", prometheus=None)
    links = pf.judge(DERIVED, live)
    assert links["vks"]["reasons"] == ["VKS cluster gpu-platform/gpu-workloads: not on the Supervisor"]
    kueue = bool(DERIVED["roles"]["gpu_scheduling_policy"]["gpu_scheduling_policy_kueue"])
    assert links["guest"]["go"] is (not kueue)
    live["guest"] = dict(crds=list(pf.KUEUE_CRDS))
    assert pf.judge(DERIVED, live)["guest"]["go"] is True
    live["guest"] = dict(error="401 Unauthorized")
    assert pf.judge(DERIVED, live)["guest"]["reasons"] == ["the guest cluster's Kubernetes API could not be read: 401 Unauthorized"]
    assert links["licensing"]["reasons"] == ["the DLS appliance: DLS appliance unreachable at dls:443 (refused)"]
    live["licensing"] = dict(dls=None, prometheus=None)
    assert pf.judge(DERIVED, live)["licensing"]["go"] is True
    live["vks"] = dict(error="timeout")
    assert pf.judge(DERIVED, live)["vks"]["go"] is False


def test_kueue_crds_needed_only_with_gang_pools():
    d = copy.deepcopy(DERIVED)
    d["roles"]["gpu_scheduling_policy"]["gpu_scheduling_policy_kueue"] = True
    live = dict(guest=dict(crds=["clusterqueues.kueue.x-k8s.io"]))
    reasons = pf.judge(d, live)["guest"]["reasons"]
    assert "localqueues.kueue.x-k8s.io, resourceflavors.kueue.x-k8s.io" in reasons[0]
    d["roles"]["gpu_scheduling_policy"]["gpu_scheduling_policy_kueue"] = False
    assert pf.judge(d, live)["guest"]["go"] is True


def test_text_table():
    granted = all_granted()
    granted[pf.ROOT_LABEL]["VirtualMachineClasses.Manage"] = False
    lines = pf.text_table(pf.judge(DERIVED, platform(privileges=granted)))
    assert lines[0].split() == ["link", "status"]
    assert lines[1].split() == ["esxi", "go"]
    assert lines[2].split() == ["vsphere", "no-go"]
    assert "VirtualMachineClasses.Manage on vCenter root folder" in lines[3]


class _Page(html_parser.HTMLParser):
    """The rows of every table of an HTML page, each a list of cell texts."""

    def __init__(self):
        html_parser.HTMLParser.__init__(self)
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append(dict(attrs=dict(attrs), cells=[]))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1]["cells"].append(" ".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None and data.strip():
            self._cell.append(data.strip())


def test_html_report_rows_and_missing_privileges():
    granted = all_granted()
    granted["host esx-h100-02"]["Host.Config.Patch"] = False
    live = platform(privileges=granted)
    links = pf.judge(DERIVED, live)
    text = pf.html_report("lab <1>", links, pf.missing_list(DERIVED, live), "8.0.3.0")
    assert text == pf.html_report("lab <1>", links, pf.missing_list(DERIVED, live), "8.0.3.0")  # no timestamps
    assert "<title>GPU pool preflight: lab &lt;1&gt;</title>" in text and "lab <1>" not in text
    assert "Result: no-go: esxi." in text
    page = _Page()
    page.feed(text)
    rows = [r["cells"] for r in page.rows]
    assert rows[0] == ["link", "status", "reasons"]
    esxi = [r for r in page.rows if r["cells"][0] == "esxi"][0]
    assert esxi["attrs"]["class"] == "no-go" and esxi["cells"][1] == "no-go"
    assert "Host.Config.Patch on host esx-h100-02" in esxi["cells"][2]
    assert [r for r in page.rows if r["cells"][0] == "guest"][0]["attrs"]["class"] == "not-checked"
    assert ["esxi", "Host.Config.Patch", "host esx-h100-02", "the NVIDIA host driver (InstallHostPatchV2_Task)"] in rows


def test_html_report_go_without_missing_privileges():
    links = pf.judge(DERIVED, platform())
    text = pf.html_report(DERIVED["design"], links, [], None)
    assert "Result: go. vCenter API version: not read." in text and "<p>None.</p>" in text


def vcenter_result(esxi=(True, []), vsphere=(True, []), missing=(), version="8.0.3.0"):
    def entry(go, reasons):
        return dict(go=go, status={True: "go", False: "no-go", None: "not checked"}[go], reasons=list(reasons))
    return dict(links=dict(esxi=entry(*esxi), vsphere=entry(*vsphere)), missing_privileges=list(missing),
                api_version=version, changed=False)


def test_merge_of_one_vcenter_keeps_its_reasons_as_they_are():
    merged = pf.merge_vcenters([("vc", vcenter_result(esxi=(False, ["cluster x of the design is not in vCenter"])))])
    assert merged["links"]["esxi"] == dict(go=False, status="no-go", reasons=["cluster x of the design is not in vCenter"])
    assert merged["links"]["vsphere"] == dict(go=True, status="go", reasons=[])
    assert merged["api_versions"] == {"vc": "8.0.3.0"}


def test_merge_names_the_vcenter_of_each_reason_and_missing_privilege():
    lack = dict(link="esxi", privilege="Host.Config.Patch", objects=["host esx-02"], what="the driver")
    west = vcenter_result()
    east = vcenter_result(esxi=(False, ["the account lacks privilege Host.Config.Patch on host esx-02 (the driver)"]),
                          missing=[lack], version="9.0.0.0")
    merged = pf.merge_vcenters([("west", west), ("east", east)])
    assert merged["links"]["esxi"] == dict(go=False, status="no-go", reasons=[
        "vCenter east: the account lacks privilege Host.Config.Patch on host esx-02 (the driver)"])
    assert merged["links"]["vsphere"]["go"] is True
    assert merged["missing"] == [dict(lack, vcenter="east")]
    assert merged["api_versions"] == {"west": "8.0.3.0", "east": "9.0.0.0"}
    assert pf.text_table(merged["links"])[2].split() == (
        "- vCenter east: the account lacks privilege Host.Config.Patch on host esx-02 (the driver)").split()
    page = pf.html_report("d", merged["links"], merged["missing"], "8.0.3.0")
    assert "<th>vCenter</th>" in page and "<td>east</td><td>esxi</td><td>Host.Config.Patch</td>" in page


def test_merge_a_vcenter_not_checked_or_failed():
    skipped = pf.merge_vcenters([("west", vcenter_result()), ("east", dict(skipped=True))])
    assert skipped["links"]["esxi"] == dict(go=None, status="not checked", reasons=["vCenter east: " + pf.NOT_CHECKED["esxi"]])
    failed = pf.merge_vcenters([("west", dict(skipped=True)), ("east", dict(failed=True, msg="Unable to log in"))])
    assert failed["links"]["vsphere"] == dict(go=False, status="no-go", reasons=[
        "vCenter west: " + pf.NOT_CHECKED["vsphere"], "vCenter east: its preflight failed: Unable to log in"])
    assert failed["api_versions"] == {} and failed["missing"] == []
