# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The resource runner: one place that owns check mode, --diff, the result and the error boundary.

A module's ``main()`` is a few lines::

    def main():
        module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
        enforce(module, "vm_class")
        Runner(module, VmClass(module)).run()

:meth:`Runner.run` calls the resource's ``read()``, ``plan(live)`` and, when the plan holds a
change and the run is not in check mode, ``apply(plan)`` (see ``_plan.Resource``). The result
is ``changed`` (whether the plan holds a change: check mode predicts exactly what a real run
reports), the resource's own keys, ``diff`` with ``--diff``, and whatever ``apply`` returns.

A read-only resource that writes a file of its own (the audit's report) and may fail on what it
found has a ``finish(result)``: called last, in check mode too, with the whole result; it returns
more result keys (``changed``, ``diff`` of its file: its writer predicts in check mode) or raises
``_plan.Failure`` with the result to fail the run after it.

Every error ends in ``fail_json``, never in a traceback:

* a client error (``_errors.ClientError``, the base of every client room's errors: ``VsphereError``,
  ``K8sError``, ``DlsError``, ``PromError``, ``LinkError``, ``ShellError`` and their subclasses,
  or one of the resource's ``errors``): "Unable to <verb> <object>: <reason>", where verb and
  object name the step that failed: ``read`` <resource> while reading, the plan's action
  (``create``, ``update``, ``delete``) or the module's verb while applying, or what the
  resource named with ``doing()``; the resource's ``next_step()`` (else the error's
  ``next_step``, else the partial state's) is appended, and the error's ``partial`` goes with
  the failure;
* one of the resource's ``refusals`` (its pure checks): "Unable to <verb> <object>: <reason>"
  with the module's verb ("manage VM class gpu-small");
* ``_plan.Failure``: its own message and result keys;
* anything else: "Unable to <step>: unexpected <type>: <text>", the traceback only in
  ``exception`` (shown with -vvv).

Each failure carries the partial state: the module's ``partial`` (``VsphereModule``), the
resource's ``partial`` and, when applying had begun, the result the plan predicted (what was
attempted; ``changed`` only where the resource's partial state says so).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure

CLIENT_ERRORS = (ClientError,)  # the runner imports no client: every client error derives from ClientError


def warn_tls_off(module):
    """One warning per connection option that turns certificate verification off: ``validate_certs``
    or ``<backend>_validate_certs`` set false (by the task, ``module_defaults`` or an environment
    fallback such as VMWARE_VALIDATE_CERTS). Given once per module run."""
    if getattr(module, "_tls_off_warned", False):
        return
    module._tls_off_warned = True  # pylint: disable=protected-access
    params = getattr(module, "params", None) or {}
    for name in sorted(params):
        if (name == "validate_certs" or name.endswith("_validate_certs")) and params[name] is False:
            module.warn("%s is false: the server's TLS certificate is not verified, so anyone on the network path "
                        "can pose as the server and read the credentials and data of this connection; name its CA "
                        "instead (the ca_file, ca_path or ca_cert option of this connection)" % name)


class Runner:
    """Drives one resource through read -> plan -> apply for one module run."""

    def __init__(self, module, resource, errors=CLIENT_ERRORS):
        self.module = module
        self.resource = resource
        self.errors = tuple(errors) + tuple(resource.errors)
        self.planned = None  # the predicted result, once applying has begun
        warn_tls_off(module)

    def _phase(self, verb):
        self.resource.step = (verb, self.resource.name)

    def outcome(self):
        """The result of the run (exceptions propagate): read, plan, apply unless check mode."""
        module, resource = self.module, self.resource
        self._phase("read")
        live = resource.read()
        self._phase(resource.verb)
        plan = resource.plan(live)
        result = dict(changed=bool(plan))
        result.update(resource.result(live, plan) or {})
        self._add_diff(result, live, plan)
        if plan and not module.check_mode:
            self._phase(plan.verb() or resource.verb)
            self.planned = dict((k, v) for k, v in result.items() if k != "changed")  # what was attempted
            result.update(resource.apply(plan) or {})
            self._add_diff(result, live, plan)  # apply may learn what the plan could not (plan.after)
        finish = getattr(resource, "finish", None)
        if finish is not None:  # what a read-only resource writes and judges from the whole result
            self._phase(resource.verb)
            result.update(finish(result) or {})
        return result

    def _add_diff(self, result, live, plan):
        if getattr(self.module, "_diff", False):
            diff = self.resource.diff(live, plan)
            if diff is not None:
                result["diff"] = diff

    def run(self):
        """Run the resource and exit the module: exit_json with the result, or fail_json."""
        try:
            result = self.outcome()
        except Failure as exc:
            # a Failure raised while handling a client error keeps it as its context: a change whose
            # outcome is unknown is read again here too
            text, extra = self.reread(exc.__cause__ or exc.__context__)
            result = dict(exc.result or {})
            result.update(extra)
            self.fail(exc.msg + text, result)
        except self.errors as exc:  # pylint: disable=catching-non-exception
            text, extra = self.reread(exc)
            found = dict(getattr(exc, "partial", None) or {})
            found.update(extra)
            self.fail(self.message(exc, self.resource.step, error=exc) + text, found)
        except self.resource.refusals as exc:  # pylint: disable=catching-non-exception
            self.fail(self.message(exc, (self.resource.verb, self.resource.name), tail=False))
        except Exception as exc:  # the last line of defence: no traceback
            text = "unexpected %s: %s" % (type(exc).__name__, exc)
            self.fail(self.message(text, self.resource.step), dict(exception=traceback.format_exc()))
        self.warn()
        self.module.exit_json(**result)

    def reread(self, exc):
        """After a change whose outcome is unknown (the client says it may or may not have been carried
        out: ``outcome_unknown``), the object read again: (text for the message, result keys).

        ``reread``: ``carried_out`` (the read finds nothing left to change), ``changes_left`` (the plan
        of the new read), or ``error`` when it could not be read; nothing for any other error.
        """
        if not getattr(exc, "outcome_unknown", False) or self.planned is None:
            return "", {}
        try:
            plan = self.resource.plan(self.resource.read())
        except Exception as again:  # pylint: disable=broad-except; the failure reported is the first one
            return ("; read again after it: it could not be read (%s)" % again,
                    dict(reread=dict(error=str(again))))
        if not plan:
            return ("; read again after it: %s is as wanted, the change was carried out" % self.resource.name,
                    dict(reread=dict(carried_out=True, changes_left=[])))
        left = ", ".join("%s %s" % (c.action, c.field) for c in plan)
        return ("; read again after it: %s still needs %s" % (self.resource.name, left),
                dict(reread=dict(carried_out=False, changes_left=plan.to_list())))

    def message(self, reason, step, tail=True, error=None):
        verb, obj = step or (self.resource.verb, self.resource.name)
        msg = "Unable to %s %s: %s" % (verb, obj, reason) if obj else "Unable to %s: %s" % (verb, reason)
        if tail:
            after = (self.resource.next_step(reason) or getattr(error, "next_step", None)
                     or self.partial().get("next_step"))
            if after:
                msg += "; %s" % after
        return msg

    def partial(self):
        """What the run left: predicted result once applying began, the module's and the resource's partial state."""
        out = dict(self.planned or {})
        out.update(getattr(self.module, "partial", None) or {})
        out.update(self.resource.partial or {})
        return out

    def warn(self):
        for text in self.resource.warnings:
            self.module.warn(text)
        self.resource.warnings = []

    def fail(self, msg, extra=None):
        result = self.partial()
        result.update(extra or {})
        result.pop("msg", None)
        self.warn()
        self.module.fail_json(msg=msg, **result)


__all__ = ["CLIENT_ERRORS", "Runner", "warn_tls_off"]
