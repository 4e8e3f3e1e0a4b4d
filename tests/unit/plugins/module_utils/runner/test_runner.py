"""The resource runner with fake resources: check mode predicts exactly, --diff, the error
boundary (no traceback, one message form) and the partial state on failure."""
import ast
import pathlib

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import DrainError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LinkError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_shell import ShellError
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource, compare
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereFault, VsphereNotFound, VsphereOutcomeUnknown
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module


class Refused(ValueError):
    pass


class Store:
    """A fake backend: objects by name, and every call made."""

    def __init__(self, objects=None, fail_on=None, error=None):
        self.objects = dict(objects or {})
        self.calls = []
        self.fail_on = fail_on
        self.error = error or VsphereFault(Exception("the API said no"), "Update", "Thing t1")

    def call(self, name, *args):
        self.calls.append((name,) + args)
        if name == self.fail_on:
            raise self.error


class Thing(Resource):
    """A resource with fields size and colour; None in ``want`` leaves a field alone."""

    refusals = (Refused,)

    def __init__(self, store, name="t1", state="present", **want):
        Resource.__init__(self, "thing %s" % name)
        self.store = store
        self.key = name
        self.state = state
        self.want = want

    def read(self):
        self.store.call("get", self.key)
        if self.want.get("size") == -1:
            raise Refused("size must be 0 or more, not -1")
        current = self.store.objects.get(self.key)
        return dict(current) if current is not None else None

    def plan(self, live):
        if self.state == "absent":
            return Plan(compare(self.name, live, None, ["size", "colour"]) if live else [], before=live, after=None)
        after = dict(live or {})
        after.update((k, v) for k, v in self.want.items() if v is not None)
        return Plan(compare(self.name, live, after, ["size", "colour"]), before=live, after=after)

    def apply(self, plan):
        if plan.verb() == "delete":
            self.store.call("delete", self.key)
            del self.store.objects[self.key]
            return None
        for change in plan:
            self.store.call(change.action, self.key, change.field, change.after)
            self.store.objects.setdefault(self.key, {})[change.field] = change.after
            self.partial.setdefault("fields_done", []).append(change.field)
            self.partial["changed"] = True
        return dict(written=True)

    def result(self, live, plan):
        return dict(changed_fields=plan.fields(), thing=plan.after)


def run(resource, **module_args):
    module = Module(**module_args)
    with pytest.raises(Exited) as exc:
        Runner(module, resource).run()
    return exc.value.result, module


# -- plan types -----------------------------------------------------------------------------

def test_compare_names_create_update_delete():
    assert compare("o", None, {"a": 1}, ["a"]) == [Change("o", "a", None, 1, "create")]
    assert compare("o", {"a": 1}, None, ["a"]) == [Change("o", "a", 1, None, "delete")]
    assert compare("o", {"a": 1, "b": 2}, {"a": 1, "b": 3}, ["a", "b"]) == [Change("o", "b", 2, 3, "update")]
    same = compare("o", {"l": [2, 1]}, {"l": [1, 2]}, ["l"], equal=lambda f, x, y: sorted(x) == sorted(y))
    assert same == []


def test_plan_fields_actions_and_verb():
    plan = Plan()
    assert not plan and plan.verb() is None and plan.to_list() == []
    plan.add("o", "a", 1, 2)
    plan.add("o", "a", 2, 3)
    plan.add("p", "b", None, 1, "create")
    assert plan and len(plan) == 3
    assert plan.fields() == ["a", "b"] and plan.fields("p") == ["b"]
    assert plan.actions() == ["update", "create"] and plan.verb() is None
    assert Plan([Change("o", "a", 1, 2, "delete")]).verb() == "delete"
    assert plan.to_list()[2] == dict(object="p", field="b", before=None, after=1, action="create")


# -- check mode and diff -------------------------------------------------------------------

def test_check_mode_predicts_exactly_what_the_real_run_reports():
    store = Store({"t1": {"size": 1, "colour": "red"}})
    check, _module = run(Thing(store, size=2), check_mode=True, diff=True)
    assert [c[0] for c in store.calls] == ["get"]  # nothing applied
    assert store.objects["t1"] == {"size": 1, "colour": "red"}
    real, _module = run(Thing(store, size=2), diff=True)
    assert check["changed"] is True and check["changed_fields"] == ["size"]
    assert dict(check, written=True) == real
    assert store.calls[-1] == ("update", "t1", "size", 2)
    again, _module = run(Thing(store, size=2), check_mode=True)
    assert again == dict(changed=False, changed_fields=[], thing={"size": 2, "colour": "red"})


def test_nothing_to_do_applies_nothing():
    store = Store({"t1": {"size": 1, "colour": "red"}})
    result, _module = run(Thing(store, size=1))
    assert result["changed"] is False and "written" not in result and store.calls == [("get", "t1")]


def test_diff_before_and_after_only_with_diff():
    store = Store()
    result, _module = run(Thing(store, size=1, colour="blue"), check_mode=True, diff=True)
    assert result["diff"] == dict(before=None, after={"size": 1, "colour": "blue"})
    assert result["changed_fields"] == ["size", "colour"]
    result, _module = run(Thing(store, size=1, colour="blue"), check_mode=True)
    assert "diff" not in result


def test_resource_may_leave_the_diff_out():
    class Info(Thing):
        def diff(self, live, plan):
            return None

    result, _module = run(Info(Store({"t1": {"size": 1}})), diff=True)
    assert "diff" not in result and result["changed"] is False


def test_delete_and_absent():
    store = Store({"t1": {"size": 1, "colour": "red"}})
    result, _module = run(Thing(store, state="absent"), diff=True)
    assert result["changed"] is True and result["diff"] == dict(before={"size": 1, "colour": "red"}, after=None)
    assert "t1" not in store.objects
    result, _module = run(Thing(store, state="absent"))
    assert result["changed"] is False


def test_info_resource_is_read_only():
    class Facts(Resource):
        def read(self):
            return {"gpus": 2}

        def result(self, live, plan):
            return dict(facts=live)

    result, _module = run(Facts("the facts"))
    assert result == dict(changed=False, facts={"gpus": 2})


def test_warnings_reach_the_user_also_on_failure():
    class Warns(Thing):
        def plan(self, live):
            self.warnings.append("choose deliberately")
            raise Failure("The design has 1 error(s)", errors=["x"])

    result, module = run(Warns(Store()))
    assert module.warnings == ["choose deliberately"]
    assert result["msg"] == "The design has 1 error(s)" and result["errors"] == ["x"] and result["failed"]


# -- the error boundary --------------------------------------------------------------------

def test_read_error_names_the_read_and_the_object():
    store = Store(fail_on="get", error=VsphereNotFound("/api/things/t1 not found"))
    result, _module = run(Thing(store, size=1))
    assert result["failed"] and result["msg"] == "Unable to read thing t1: /api/things/t1 not found"


def test_apply_error_names_the_plan_action_and_carries_the_partial_state():
    store = Store({"t1": {"size": 1, "colour": "red"}}, fail_on="update")
    result, _module = run(Thing(store, size=2, colour="blue"), diff=True)
    assert result["failed"]
    assert result["msg"] == "Unable to update thing t1: Update on Thing t1: the API said no"
    # nothing was done before the failing call; the prediction goes with the failure
    assert "fields_done" not in result and "changed" not in result
    assert result["changed_fields"] == ["size", "colour"] and result["diff"]["after"]["colour"] == "blue"


def test_partial_state_of_a_failure_half_way():
    class Second(Store):
        def call(self, name, *args):
            Store.call(self, name, *args)
            if name == "update" and args[1] == "colour":
                raise K8sError("the API server answered 500")

    store = Second({"t1": {"size": 1, "colour": "red"}})
    result, _module = run(Thing(store, size=2, colour="blue"))
    assert result["msg"] == "Unable to update thing t1: the API server answered 500"
    assert result["fields_done"] == ["size"] and result["changed"] is True


def test_module_partial_and_next_step_join_the_failure():
    store = Store({"t1": {"size": 1}}, fail_on="update", error=DlsError("refused"))
    partial = dict(hosts_in_maintenance=["esx-01"], next_step="rerun to finish")
    result, _module = run(Thing(store, size=2), partial=partial)
    assert result["msg"] == "Unable to update thing t1: refused; rerun to finish"
    assert result["hosts_in_maintenance"] == ["esx-01"] and result["next_step"] == "rerun to finish"


def test_doing_names_the_step_that_failed_and_is_restored_after():
    class Steps(Thing):
        def read(self):
            with self.doing("list the depots of", "cluster c1"):
                self.store.call("depots")
            return Thing.read(self)

    result, _module = run(Steps(Store({"t1": {"size": 1}}, fail_on="depots", error=VsphereNotFound("gone"))))
    assert result["msg"] == "Unable to list the depots of cluster c1: gone"
    result, _module = run(Steps(Store({"t1": {"size": 1}}, fail_on="get", error=VsphereNotFound("gone"))))
    assert result["msg"] == "Unable to read thing t1: gone"


def test_next_step_of_the_resource():
    class Token(Thing):
        def next_step(self, exc):
            return "no token was written, a rerun makes it"

    result, _module = run(Token(Store(fail_on="get", error=DlsError("TLS failed"))))
    assert result["msg"] == "Unable to read thing t1: TLS failed; no token was written, a rerun makes it"


def test_refusal_names_the_module_verb_and_changes_nothing():
    store = Store({"t1": {"size": 1}})
    result, _module = run(Thing(store, size=-1))
    assert result["msg"] == "Unable to manage thing t1: size must be 0 or more, not -1"
    assert store.objects == {"t1": {"size": 1}}


def test_failure_keeps_its_message_and_result():
    class Stops(Thing):
        def plan(self, live):
            raise Failure("Cluster c1 is not managed by a vLCM image. Nothing was changed.", cluster="c1")

    result, _module = run(Stops(Store()))
    assert result == dict(failed=True, msg="Cluster c1 is not managed by a vLCM image. Nothing was changed.",
                          cluster="c1")


def test_an_unexpected_exception_is_no_traceback():
    class Broken(Thing):
        def plan(self, live):
            return {}["missing"]

    result, _module = run(Broken(Store()))
    assert result["failed"] and result["msg"] == "Unable to manage thing t1: unexpected KeyError: 'missing'"
    assert "Traceback" in result["exception"]


def test_extra_client_errors_of_a_resource():
    class OwnError(Exception):
        pass

    class Own(Thing):
        errors = (OwnError,)

        def read(self):
            raise OwnError("quota exceeded")

    result, _module = run(Own(Store()))
    assert result["msg"] == "Unable to read thing t1: quota exceeded" and "exception" not in result


CLIENT_ERROR_CASES = [
    (VsphereNotFound("/api/things/t1 not found"), "/api/things/t1 not found"),
    (VsphereRestError("the REST API answered 503", status=503), "the REST API answered 503"),
    (K8sError("the API server answered 500", status=500), "the API server answered 500"),
    (DrainError("a PodDisruptionBudget blocks the eviction"), "a PodDisruptionBudget blocks the eviction"),
    (DlsError("TLS failed", kind="tls"), "TLS failed"),
    (PromError("Prometheus answered 400", status=400), "Prometheus answered 400"),
    (LinkError("could not read the ClusterPolicy: 403"), "could not read the ClusterPolicy: 403"),
    (ShellError("ssh: connection refused"), "ssh: connection refused"),
]


@pytest.mark.parametrize("error,text", CLIENT_ERROR_CASES, ids=lambda v: type(v).__name__ if isinstance(v, Exception) else "")
def test_every_client_error_is_caught_through_the_one_base(error, text):
    assert isinstance(error, ClientError) and error.msg == text
    result, _module = run(Thing(Store(fail_on="get", error=error)))
    assert result["failed"] and result["msg"] == "Unable to read thing t1: %s" % text
    assert "exception" not in result  # not the unexpected-exception path


def test_a_client_error_carries_partial_state_and_a_next_step():
    error = ClientError("the host did not come back", partial=dict(hosts_done=["esx-01"]),
                        next_step="power the host on and rerun")
    result, _module = run(Thing(Store({"t1": {"size": 1}}, fail_on="update", error=error), size=2))
    assert result["msg"] == "Unable to update thing t1: the host did not come back; power the host on and rerun"
    assert result["hosts_done"] == ["esx-01"] and "next_step" not in result

    class Token(Thing):  # the resource's own next step comes first
        def next_step(self, exc):
            return "rerun"

    result, _module = run(Token(Store({"t1": {"size": 1}}, fail_on="update", error=error), size=2))
    assert result["msg"] == "Unable to update thing t1: the host did not come back; rerun"


def test_a_plain_client_error_has_no_partial_state():
    error = ClientError("no")
    assert (error.msg, error.partial, error.next_step, error.outcome_unknown) == ("no", None, None, False)
    assert str(error) == "no"
    assert VsphereOutcomeUnknown("lost").outcome_unknown and K8sError("x", outcome_unknown=True).outcome_unknown


def test_the_runner_imports_no_client():
    tree = ast.parse(pathlib.Path(_runner.__file__).read_text())
    modules = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    modules += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    rooms = sorted(set(m.split(".")[5] for m in modules if m.startswith("ansible_collections.gpupool.vcf.plugins.module_utils.")))
    assert rooms == ["pure"], modules
    assert _runner.CLIENT_ERRORS == (ClientError,)


def test_a_plan_with_changes_needs_apply():
    class NoApply(Resource):
        def plan(self, live):
            return Plan([Change("x", "f", 1, 2)])

    result, _module = run(NoApply("object x"))
    assert result["msg"].startswith("Unable to update object x: unexpected NotImplementedError")
    result, _module = run(NoApply("object x"), check_mode=True)
    assert result == dict(changed=True)


# -- a change whose outcome is unknown -----------------------------------------------------

class LostAnswerStore(Store):
    """Carries the write out (``done``) or not, then raises VsphereOutcomeUnknown as a gateway's 504 does."""

    def __init__(self, objects=None, done=True):
        Store.__init__(self, objects)
        self.done = done

    def call(self, name, *args):
        self.calls.append((name,) + args)
        if name in ("create", "update"):
            if self.done:
                self.objects.setdefault(args[0], {})[args[1]] = args[2]
            raise VsphereOutcomeUnknown("POST /things: HTTP 504; the request may or may not have been carried out")


@pytest.mark.parametrize("done", [True, False])
def test_an_unknown_outcome_is_read_again_and_reported(done):
    store = LostAnswerStore({"t1": {"size": 1, "colour": "red"}}, done=done)
    result, _module = run(Thing(store, size=2))
    assert result["failed"] and "may or may not have been carried out" in result["msg"]
    assert [c[0] for c in store.calls] == ["get", "update", "get"]  # sent once, then read again
    if done:
        assert "read again after it: thing t1 is as wanted, the change was carried out" in result["msg"]
        assert result["reread"] == dict(carried_out=True, changes_left=[])
    else:
        assert "read again after it: thing t1 still needs update size" in result["msg"]
        assert result["reread"]["carried_out"] is False
        assert result["reread"]["changes_left"] == [dict(object="thing t1", field="size", before=1, after=2,
                                                         action="update")]


def test_other_errors_are_not_read_again():
    store = Store({"t1": {"size": 1}}, fail_on="update")
    result, _module = run(Thing(store, size=2))
    assert "reread" not in result and [c[0] for c in store.calls] == ["get", "update"]


# -- certificate verification off ----------------------------------------------------------

def test_a_warning_for_each_connection_without_certificate_verification():
    module = Module(params={"validate_certs": False, "dls_validate_certs": False, "prometheus_validate_certs": True,
                            "vcenter_validate_certs": None, "name": "x"})
    with pytest.raises(Exited):
        Runner(module, Thing(Store({"t1": {"size": 1}}), size=1)).run()
    assert len(module.warnings) == 2, module.warnings
    assert module.warnings[0].startswith("dls_validate_certs is false: the server's TLS certificate is not verified")
    assert module.warnings[1].startswith("validate_certs is false")
    again = Module(params={"validate_certs": True}, warnings_expected=False)
    with pytest.raises(Exited):
        Runner(again, Thing(Store({"t1": {"size": 1}}), size=1)).run()


def test_a_failure_raised_over_an_unknown_outcome_is_read_again_too():
    class Wrapping(Thing):
        def apply(self, plan):
            try:
                return Thing.apply(self, plan)
            except VsphereOutcomeUnknown as exc:
                raise Failure("Unable to configure thing t1: %s; fix the cause and rerun" % exc, hosts_changed=[])

    store = LostAnswerStore({"t1": {"size": 1, "colour": "red"}}, done=True)
    result, _module = run(Wrapping(store, size=2))
    assert result["msg"].startswith("Unable to configure thing t1: POST /things: HTTP 504")
    assert result["msg"].endswith("fix the cause and rerun; read again after it: thing t1 is as wanted, "
                                  "the change was carried out")
    assert result["reread"]["carried_out"] is True and result["hosts_changed"] == []
    plain = Store({"t1": {"size": 1}})

    class Refusing(Thing):
        def apply(self, plan):
            raise Failure("Unable to configure thing t1: no")

    result, _module = run(Refusing(plain, size=2))
    assert result["msg"] == "Unable to configure thing t1: no" and "reread" not in result
