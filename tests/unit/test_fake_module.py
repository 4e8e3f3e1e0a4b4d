"""The fake AnsibleModule of the unit tests exits as AnsibleModule does: exit_json and fail_json raise a
SystemExit, which a module's broad ``except Exception`` does not catch, so a test cannot pass on a module that
swallows its own exit."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from tests.lib.fake_module import Exited, FakeModule


def test_exited_is_a_system_exit_with_the_status_ansible_gives():
    with pytest.raises(SystemExit) as done:
        FakeModule().exit_json(changed=False)
    assert done.value.code == 0 and done.value.result == dict(changed=False)
    with pytest.raises(SystemExit) as failed:
        FakeModule().fail_json(msg="no")
    assert failed.value.code == 1 and failed.value.result == dict(failed=True, msg="no")


def test_a_broad_except_in_module_code_does_not_swallow_the_exit():
    module = FakeModule()
    went_on = []

    def module_code():
        try:
            module.fail_json(msg="Unable to read x: gone")
        except Exception:  # pylint: disable=broad-except; the habit this fake must not reward
            went_on.append(True)

    with pytest.raises(Exited) as done:
        module_code()
    assert went_on == [] and done.value.result["msg"] == "Unable to read x: gone"


class _FailsWhileReading(Resource):
    def __init__(self, module):
        Resource.__init__(self, "thing one")
        self.module = module

    def read(self):
        self.module.fail_json(msg="Unable to read thing one: its own words", hint="the resource's")

    def plan(self, live):
        return Plan()


def test_a_resource_that_fails_the_module_itself_keeps_its_message_through_the_runner():
    """The runner's last line of defence (``except Exception``) must not turn the resource's own failure into
    "unexpected Exited"."""
    module = FakeModule()
    with pytest.raises(Exited) as done:
        Runner(module, _FailsWhileReading(module)).run()
    result = done.value.result
    assert result["msg"] == "Unable to read thing one: its own words"
    assert result["hint"] == "the resource's" and "exception" not in result
