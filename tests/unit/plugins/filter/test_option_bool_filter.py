"""option_bool: validate_certs in the playbooks read as a boolean module option is, never guessed."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter.option_bool import option_bool


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), ("true", True), ("True ", True), (" yes", True), ("on", True), ("1", True),
    (1, True), ("false", False), ("No", False), ("off", False), ("0", False), (0, False), ("n", False)])
def test_clear_booleans(value, expected):
    assert option_bool(value, "validate_certs") is expected


@pytest.mark.parametrize("value", ["ture", "enabled", "disabled", "2", 2, "yes please", ["true"], {"a": 1}])
def test_anything_else_is_an_error_naming_the_option(value):
    # the bool filter reads each of these as false: certificate verification off without a word
    with pytest.raises(AnsibleFilterError, match="VMWARE_VALIDATE_CERTS.*not a boolean"):
        option_bool(value, "VMWARE_VALIDATE_CERTS")


@pytest.mark.parametrize("value", [None, "", "  "])
def test_unset_is_the_default(value):
    assert option_bool(value, "validate_certs", default=True) is True
    assert option_bool(value, "validate_certs", default=False) is False
    with pytest.raises(AnsibleFilterError, match="validate_certs is not set"):
        option_bool(value, "validate_certs")
