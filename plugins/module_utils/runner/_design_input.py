# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pool design a module is given: ``design`` (a dict) or ``design_file`` (YAML or JSON), read
one way for every module that takes one. Failures are ``_plan.Failure`` (the runner reports
them), raised before any other read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    HAS_YAML = False

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import DESIGN_FILE_MAX, normalize
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure

# the longest parser message a failure repeats (PyYAML quotes the lines around the problem)
_PARSE_MESSAGE_MAX = 400


def _text(exc):
    text = str(exc) or type(exc).__name__
    return text if len(text) <= _PARSE_MESSAGE_MAX else text[:_PARSE_MESSAGE_MAX - 3] + "..."


class _AliasFound(Exception):
    """The design uses a YAML alias (``*name``)."""

    def __init__(self, mark):
        Exception.__init__(self, "line %d, column %d" % (mark.line + 1, mark.column + 1))


if HAS_YAML:
    class _DesignLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        """The safe loader without aliases: a design names each value once, and an alias is how a
        few hundred bytes expand to gigabytes (the "billion laughs")."""

        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                raise _AliasFound(self.peek_event().start_mark)
            return yaml.SafeLoader.compose_node(self, parent, index)


def load_design_file(path):
    """The design in the file at `path` (YAML, or JSON without PyYAML), as it is written.

    Refused before parsing: a file over ``DESIGN_FILE_MAX`` bytes; while parsing: any YAML alias."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(DESIGN_FILE_MAX + 1)
    except OSError as exc:
        raise Failure("Unable to read design file %s: %s" % (path, _text(exc)))
    if len(data) > DESIGN_FILE_MAX:
        raise Failure("Unable to read design file %s: it is over the bound of %d bytes (1 MiB); a pool design "
                      "is a few kilobytes" % (path, DESIGN_FILE_MAX))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Failure("Unable to read design file %s: %s" % (path, _text(exc)))
    parse_errors = (ValueError, yaml.YAMLError) if HAS_YAML else (ValueError,)
    try:
        return yaml.load(text, Loader=_DesignLoader) if HAS_YAML else json.loads(text)  # nosec - a safe loader
    except _AliasFound as exc:
        raise Failure("Unable to parse design file %s: a YAML alias at %s; the design takes no aliases (write "
                      "each value where it is used)" % (path, exc))
    except parse_errors as exc:
        raise Failure("Unable to parse design file %s: %s" % (path, _text(exc)))
    except RecursionError:
        raise Failure("Unable to parse design file %s: it is nested too deep" % path)


def given_design(params):
    """The design of the module's ``design`` or ``design_file`` option (None when neither is set)."""
    if params.get("design") is not None:
        return params["design"]
    if params.get("design_file"):
        return load_design_file(params["design_file"])
    return None


def normalized_design(params):
    """The given design normalized by the design schema (None when none is given); a design with
    schema errors is refused, naming each, before anything else is read."""
    design = given_design(params)
    if design is None:
        return None
    normalized, findings = normalize(design)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise Failure("The design has errors; fix them first (gpu_pool_design): %s"
                      % "; ".join("%s: %s" % (f.object, f.message) for f in errors[:20])
                      + ("; and %d more" % (len(errors) - 20) if len(errors) > 20 else ""),
                      findings=[f.to_dict() for f in errors])
    return normalized


def module_design(module, normalized=True):
    """:func:`normalized_design` (or :func:`given_design`) of a module's params; a failure ends the
    module with its message, for modules that need the design before their resource runs."""
    try:
        return normalized_design(module.params) if normalized else given_design(module.params)
    except Failure as exc:
        module.fail_json(msg=exc.msg, **exc.result)
    return None  # not reached: fail_json exits


__all__ = ["given_design", "load_design_file", "module_design", "normalized_design"]
