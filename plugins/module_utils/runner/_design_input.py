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

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure


def _text(exc):
    return str(exc) or type(exc).__name__


def load_design_file(path):
    """The design in the file at `path` (YAML, or JSON without PyYAML), as it is written."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except (IOError, OSError, UnicodeDecodeError) as exc:
        raise Failure("Unable to read design file %s: %s" % (path, _text(exc)))
    parse_errors = (ValueError, yaml.YAMLError) if HAS_YAML else (ValueError,)
    try:
        return yaml.safe_load(text) if HAS_YAML else json.loads(text)
    except parse_errors as exc:
        raise Failure("Unable to parse design file %s: %s" % (path, _text(exc)))


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
                      % "; ".join("%s: %s" % (f.object, f.message) for f in errors),
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
