"""playbooks/observability.yml puts the design's Grafana dashboards where Grafana users expect them,
on the rig: ConfigMaps labelled for Grafana's dashboard sidecar in the namespace given, each with
the collection's ownership label; a rerun changes nothing; a dashboard edited behind the
collection's back is reported by --check (and left as it is) and put back by a run; a dashboard
ConfigMap the collection made that the design no longer makes is removed, one made by hand is
kept. With the files kind the same JSON goes to a provisioning folder; a bad kind writes nothing."""
import json

import yaml
from kubernetes import client

from ansible_collections.gpupool.vcf.plugins.filter.grafana_dashboards import grafana_dashboards
from tests.lib.ansible_run import run_playbook
from tests.lib.paths import ROOT

PLAYBOOK = ROOT / "playbooks" / "observability.yml"
DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
LABEL = "grafana_dashboard"


def changed(run):
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stats["changed"]


def boards(core, ns):
    return {m.metadata.name: m for m in core.list_namespaced_config_map(ns, label_selector="%s=1" % LABEL).items}


def test_dashboards_as_sidecar_config_maps(k8s_rig, k8s_api, k8s_namespace, tmp_path):
    core = client.CoreV1Api(k8s_api)
    ns = k8s_namespace
    stale = {"app.kubernetes.io/managed-by": "gpupool.vcf", "gpupool.vcf/design": DESIGN["name"], LABEL: "1"}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "gpupool-lab-gpupool-retired", "labels": stale},
                                           "data": {"old.json": "{}"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "by-hand", "labels": {LABEL: "1"}},
                                           "data": {"mine.json": "{}"}})
    extra = {"observability_output_dir": str(tmp_path), "observability_dashboard_kind": "ConfigMap",
             "observability_dashboard_namespace": ns, "observability_kubeconfig": str(k8s_rig.kubeconfig)}
    assert changed(run_playbook(PLAYBOOK, extra_vars=extra)) > 0
    wanted = {b["metadata"]["name"]: b for b in grafana_dashboards(DESIGN, kind="ConfigMap", namespace=ns)}
    live = boards(core, ns)
    assert set(live) == set(wanted) | {"by-hand"}
    for name, want in wanted.items():
        assert live[name].data == want["data"]
        assert live[name].metadata.labels == want["metadata"]["labels"]
        assert live[name].metadata.labels["app.kubernetes.io/managed-by"] == "gpupool.vcf"
    written = list(yaml.safe_load_all((tmp_path / "gpupool-dashboards.configmaps.yml").read_text()))
    assert [w["metadata"]["name"] for w in written] == list(wanted)

    assert changed(run_playbook(PLAYBOOK, extra_vars=extra)) == 0

    name = "gpupool-lab-gpupool-training"
    key = "%s.json" % name
    edited = json.loads(wanted[name]["data"][key])
    edited["panels"] = edited["panels"][:1]
    core.patch_namespaced_config_map(name, ns, {"data": {key: json.dumps(edited)}})
    assert changed(run_playbook(PLAYBOOK, check=True, extra_vars=extra)) > 0
    assert json.loads(boards(core, ns)[name].data[key]) == edited
    assert changed(run_playbook(PLAYBOOK, extra_vars=extra)) > 0
    assert boards(core, ns)[name].data == wanted[name]["data"]
    assert set(boards(core, ns)) == set(wanted) | {"by-hand"}


def test_dashboards_as_provisioning_files_and_a_bad_kind(tmp_path):
    run = run_playbook(PLAYBOOK, extra_vars={"observability_output_dir": str(tmp_path)})
    assert changed(run) > 0
    models = grafana_dashboards(DESIGN)
    files = sorted((tmp_path / "dashboards").glob("*.json"))
    assert [f.stem for f in files] == sorted(m["uid"] for m in models)
    for model in models:
        assert json.loads((tmp_path / "dashboards" / ("%s.json" % model["uid"])).read_text()) == model
    bad = run_playbook(PLAYBOOK, extra_vars={"observability_output_dir": str(tmp_path / "bad"),
                                             "observability_dashboard_kind": "Secret"})
    assert bad.rc != 0 and "observability_dashboard_kind is Secret" in bad.stdout
    assert not (tmp_path / "bad").exists()
