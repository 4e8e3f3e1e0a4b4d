"""VM class revisions: the name of a changed shape, the family, the superseded classes, retirement (pure)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc

A = dict(cpu_count=8, memory_mb=65536, vgpu_profiles=["nvidia_h100-1-10c"], description="gpupool inf: a",
         memory_reservation=100, cpu_reservation=0)
B = dict(A, vgpu_profiles=["nvidia_h100-2-20c"])


def test_revision_is_a_function_of_the_shape_only():
    assert vmc.revision(A) == vmc.revision(dict(A, description="other", cpu_reservation=50))
    assert vmc.revision(A) != vmc.revision(B)
    assert vmc.revision(dict(A, vgpu_profiles=["a", "b"])) == vmc.revision(dict(A, vgpu_profiles=["B", "A"]))
    assert vmc.revision(A) != vmc.revision(dict(A, cpu_count=16))
    assert vmc.revision(A) != vmc.revision(dict(A, memory_mb=131072))
    # pinned: the audit and the converge of another release must compute the same name
    assert vmc.revision_name("gpu-inf", A) == "gpu-inf-r" + vmc.revision(A)
    assert len(vmc.revision(A)) == 5 and vmc.revision(A) == vmc.revision(dict(A))


def test_revision_name_leaves_room_for_the_suffix():
    assert len(vmc.revision_name("a" * 56, A)) == 63
    with pytest.raises(vmc.VmClassError, match="longer than 56"):
        vmc.revision_name("a" * 57, A)
    with pytest.raises(vmc.VmClassError, match="DNS label"):
        vmc.revision_name("Bad", A)


def test_family_is_the_base_and_its_revisions_only():
    names = ["gpu-inf", "gpu-inf-r0a1b2", "gpu-inf-r0a1b", "gpu-inf-big", "gpu-inf-r0a1b2-x", "gpu-inference",
             "gpu-inf-rZZZZZ", "gpu-inf-rffff0"]
    assert vmc.family("gpu-inf", names) == ["gpu-inf", "gpu-inf-r0a1b2", "gpu-inf-rffff0"]


def test_resolve_new_pool_keeps_the_design_name():
    assert vmc.resolve("gpu-inf", A, {}) == ("gpu-inf", [])
    assert vmc.resolve("gpu-inf", A, {"other": B}) == ("gpu-inf", [])


def test_resolve_same_shape_is_the_class_there():
    assert vmc.resolve("gpu-inf", A, {"gpu-inf": dict(A, description="changed")}) == ("gpu-inf", [])


def test_resolve_changed_shape_gets_a_revision_and_supersedes_the_old():
    rev = vmc.revision_name("gpu-inf", B)
    assert vmc.resolve("gpu-inf", B, {"gpu-inf": A}) == (rev, ["gpu-inf"])
    # after the new class was made (the old still there): the same answer, so a rerun resumes
    assert vmc.resolve("gpu-inf", B, {"gpu-inf": A, rev: B}) == (rev, ["gpu-inf"])
    # after the old one was retired
    assert vmc.resolve("gpu-inf", B, {rev: B}) == (rev, [])
    # back to A: the revision of A (the base is gone), B superseded
    assert vmc.resolve("gpu-inf", A, {rev: B}) == (vmc.revision_name("gpu-inf", A), [rev])
    # back to A while the base with A is still there: the base again
    assert vmc.resolve("gpu-inf", A, {"gpu-inf": A, rev: B}) == ("gpu-inf", [rev])


def test_retirable_only_ours_and_unused():
    live = {"gpu-inf": A, "gpu-x": dict(A, description="made by hand"), "gpu-y": A}
    retire, keep = vmc.retirable(["gpu-inf", "gpu-x", "gpu-y", "gone"], live, ["gpu-y"])
    assert retire == ["gpu-inf"]
    assert [k["name"] for k in keep] == ["gpu-x", "gpu-y"]
    assert "not created by the collection" in keep[0]["why"] and "still used" in keep[1]["why"]
    assert vmc.owned(A) and not vmc.owned(None) and not vmc.owned({"description": "x gpupool "})


def test_revision_steps_are_ordered():
    assert vmc.revision_steps("gpu-inf-r1", []) == []
    steps = vmc.revision_steps("gpu-inf-r1", ["gpu-inf"], namespaces=["team-a"], node_pools=["inf"])
    order = ["create VM class gpu-inf-r1", "add gpu-inf-r1 to namespace team-a", "move node pool inf to gpu-inf-r1",
             "wait until every node", "remove gpu-inf from namespace team-a", "delete VM class gpu-inf once"]
    assert len(steps) == len(order) and all(s.startswith(o) for s, o in zip(steps, order))
    generic = vmc.revision_steps("gpu-inf-r1", ["gpu-inf"])
    assert len(generic) == 6 and "namespaces that offer gpu-inf" in generic[1]


def test_namespace_classes_replace_and_keep():
    assert vmc.namespace_classes(["gpu-inf", "cpu"], {"gpu-inf": "gpu-inf-r1"}, {"gpu-inf": ["gpu-inf"]}) == [
        "gpu-inf-r1", "gpu-inf", "cpu"]
    assert vmc.namespace_classes(["gpu-inf"], {"gpu-inf": "gpu-inf-r1"}) == ["gpu-inf-r1"]
    assert vmc.namespace_classes(None, {}) == []
