"""The bigger fleet of tests/bench/bench_noop_site.py: the example grown by GPU hosts without VMs, and a design
whose MIG geometry stays where the fleet runs MIG (the node VMs of the inference pool sit on those GPUs), so the
converge of the bigger fleet repairs only the example's own drift and never turns MIG off under a MIG-backed VM."""
import importlib.util
import pathlib

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import mig_geometry_for

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench_noop_site.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_noop_site", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def host_names(fleet, cluster):
    """The simulator's names of a fleet cluster's hosts (a group ``prefix`` + ``count``: prefix01 .. prefixNN)."""
    entry = [c for c in fleet["clusters"] if c["name"] == cluster][0]
    names = []
    for host in entry["hosts"]:
        if host.get("name"):
            names.append(host["name"])
        else:
            names += ["%s%02d" % (host["prefix"], i) for i in range(1, host["count"] + 1)]
    return names


def fleet_layout(fleet, cluster):
    """{host name: MIG GPU indexes} as the fleet starts (hosts without ``mig``: none)."""
    entry = [c for c in fleet["clusters"] if c["name"] == cluster][0]
    mig = dict((h["name"], sorted(h["mig"])) for h in entry["hosts"] if h.get("name") and h.get("mig"))
    return dict((name, mig.get(name, [])) for name in host_names(fleet, cluster))


def derived_layout(design, fleet, cluster):
    geometry = derive(design)["esxi"]["clusters"][cluster]["mig_geometry"]
    return mig_geometry_for(geometry, host_names(fleet, cluster))


def test_the_example_design_derives_the_example_fleets_mig_gpus(bench):
    fleet = bench.load_fleet()
    design = bench.yaml.safe_load(bench.DESIGN.read_text())
    assert derived_layout(design, fleet, "gpu-h100") == fleet_layout(fleet, "gpu-h100")
    assert fleet_layout(fleet, "gpu-h100")["esx-h100-04"] == [0, 1]


@pytest.mark.parametrize("extra", [1, 2, 3, 8, 20])
def test_the_grown_design_keeps_mig_where_the_fleet_runs_it(bench, extra):
    fleet, design = bench.grown(extra)
    h100, l40s = extra // 2, extra - extra // 2
    example = bench.load_fleet()
    for cluster, added in (("gpu-h100", h100), ("gpu-l40s", l40s)):
        names = host_names(fleet, cluster)
        assert len(names) == len(host_names(example, cluster)) + added
        assert [c["hosts"] for c in design["clusters"] if c["name"] == cluster] == [len(names)]
        layout = derived_layout(design, fleet, cluster)
        assert layout == fleet_layout(fleet, cluster), (cluster, extra)
    # the added H100 hosts run no MIG, and the example's MIG hosts keep theirs
    layout = derived_layout(design, fleet, "gpu-h100")
    assert layout["esx-h100-03"] == layout["esx-h100-04"] == [0, 1]
    assert all(layout[name] == [] for name in layout if name.startswith("esx-h100-x"))


def test_left_to_derive_the_geometry_would_move_off_the_node_vms(bench):
    """Why the bench pins it: derive() spreads the MIG cards over the grown cluster's positions."""
    fleet, design = bench.grown(2)
    for cluster in design["clusters"]:
        cluster.pop("mig_geometry", None)
    assert derived_layout(design, fleet, "gpu-h100")["esx-h100-04"] == []
