"""host_rebuild.yml gives the host's turn of esxi_gpu_host the cluster's inputs that site.yml gives the
cluster's roll (the vGPU mode among them), each from the design or an explicit variable."""
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]

# what only a whole cluster's roll needs: the guest clusters to drain and the priority classes it protects
ROLL_ONLY = {"esxi_gpu_host_guest_kubeconfigs", "esxi_gpu_host_protected_priority_classes"}


def role_vars(tasks, role="gpupool.vcf.esxi_gpu_host"):
    """The vars of every include_role of ``role`` in ``tasks`` (blocks walked)."""
    out = []
    for task in tasks or []:
        for key in ("block", "rescue", "always"):
            out.extend(role_vars(task.get(key), role))
        if (task.get("ansible.builtin.include_role") or {}).get("name") == role:
            out.append(task.get("vars") or {})
    return out


def play_tasks(path):
    return [t for play in yaml.safe_load(path.read_text()) for t in play.get("tasks") or []]


def test_host_turn_gets_every_cluster_input_of_site():
    site = role_vars(play_tasks(ROOT / "playbooks" / "site.yml"))
    rebuild = role_vars(play_tasks(ROOT / "playbooks" / "host_rebuild.yml"))
    assert len(site) == 1 and len(rebuild) == 1
    missing = set(site[0]) - set(rebuild[0]) - ROLL_ONLY
    assert not missing, "host_rebuild.yml does not pass %s to the host's turn" % sorted(missing)


def test_vgpu_mode_from_the_design_or_the_variable():
    rebuild = role_vars(play_tasks(ROOT / "playbooks" / "host_rebuild.yml"))[0]
    assert rebuild["esxi_gpu_host_vgpu_mode"] == "{{ host_rebuild__input.vgpu_mode }}"
    inputs = [t for t in play_tasks(ROOT / "playbooks" / "host_rebuild.yml") if t.get("name") == "The inputs of the host's turn"][0]
    expr = inputs["ansible.builtin.set_fact"]["host_rebuild__input"]["vgpu_mode"]
    assert "esxi_gpu_host_vgpu_mode" in expr and "host_rebuild__design.esxi_gpu_host_vgpu_mode" in expr
