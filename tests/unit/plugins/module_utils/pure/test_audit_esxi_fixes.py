"""The esxi link's rule table gives every rule its fix (the 4th element): a finding of a rule whose fix names
nothing of the host takes the table's, one that names the design's value or the GPU keeps its own."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_esxi, _audit_report
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change


def test_every_esxi_rule_has_its_fix_in_the_table_and_the_catalogue():
    assert all(len(entry) == 4 and entry[3] for entry in _audit_esxi.RULES.values())
    for rule, entry in _audit_esxi.RULES.items():
        assert _audit_report.RULES[rule] == entry[:3] and _audit_report.FIXES[rule] == entry[3]


def test_a_finding_takes_the_tables_fix_or_names_its_own():
    h = dict(name="esx-01", cluster="gpu", maintenance_mode=False)
    want = dict(esxi_gpu_host_driver_version="550.90.05", esxi_gpu_host_graphics_type="shared_direct")
    owed = [Change("host esx-01", "reboot", None, None, "reboot", reason="options changed in boot 1")]
    message, fix = _audit_esxi._ESXI_TEXT["host_reboot_pending"](h, want, owed)  # pylint: disable=protected-access
    assert fix is None and "owes a reboot" in message
    [found] = [_audit_esxi.finding("host_reboot_pending", "host esx-01", message, fix)]
    assert found["fix"] == _audit_esxi.RULES["host_reboot_pending"][3]
    graphics = [Change("host esx-01", "graphics.default_type", "shared", "shared_direct", "set", reason="x")]
    _message, fix = _audit_esxi._ESXI_TEXT["graphics_not_shared_direct"](h, want, graphics)  # pylint: disable=protected-access
    assert "to shared_direct" in fix and fix != _audit_esxi.RULES["graphics_not_shared_direct"][3]
