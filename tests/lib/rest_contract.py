"""The vSphere Automation API contract (``/api``) as VMware publishes it in its Python bindings
(the ``vmware-vcenter`` package with ``vmware-vapi-runtime``; a test dependency only), and a
checker of recorded requests and answers against it.

Every binding module ``com.vmware.*_client`` has, per service, a stub class whose constructor
hands ``ApiInterfaceStub`` the operations (input, output and error types) and their REST
metadata (HTTP method, URL template without the ``/api`` prefix, path variables, query
parameters, the parameter that is the request body). :func:`load` builds those stubs offline
and keeps what matching and validation need.

:meth:`Contract.check` takes one recorded exchange (the vSphere simulator's ``-rest-log``
lines: method, path, query, request body, status, response body) and returns the mismatches,
each naming the request and the field (``$.spec.memory_MB``):

- the (method, path, query) must match an operation's template (``{var}`` is one path
  segment, a literal segment beats a variable, a template's ``?action=x`` must be in the
  query); ``vmw-task=true`` selects the operation's task form;
- path variables and query parameters must have the types of the operation's inputs (an enum
  value must be one of the enum's), unknown query parameters are mismatches;
- the request body must fit the input type: objects carry only the struct's fields, every
  field that is not optional, values of the field's type, enum values the enum knows, the
  consistency rules of unions (a field that belongs to another case of the discriminant);
- a 2xx answer must fit the output type (void: no body); an error answer must be a standard
  vAPI error (``error_type``, ``messages``) of the status that error maps to, and one the
  operation declares;
- a task started with ``vmw-task=true`` is remembered: when ``GET /api/cis/tasks/{task}``
  reports it ``SUCCEEDED``, its ``result`` must fit the output type of the operation that
  started it.

Types are checked as the bindings declare them in the JSON form of ``/api``: structs and maps
are JSON objects (field names as the struct spells them, e.g. ``memory_MB``), lists and sets
arrays, integers integral numbers, date-times RFC 3339 strings (parsed with the runtime's own
parser), ids, URIs and secrets strings, optional fields absent or ``null``, dynamic structs
and opaque values any JSON object or value.
"""
import importlib
import inspect
import json
import pkgutil
import re
import warnings
from urllib.parse import parse_qsl, unquote

API_PREFIX = "/api"
TASK_PARAM = "vmw-task"

# Requests that are not calls of a binding operation, with the reason. None so far: the
# session (POST/GET/DELETE /api/session) is com.vmware.cis.session in the bindings.
NOT_IN_BINDINGS = {}


class Mismatch:
    """One difference between an exchange and the contract."""

    def __init__(self, request, where, problem):
        self.request = request
        self.where = where
        self.problem = problem

    def __str__(self):
        return "%s: %s: %s" % (self.request, self.where, self.problem)

    def __repr__(self):
        return "Mismatch(%s)" % self


class Operation:
    """One operation of a service with its REST metadata."""

    def __init__(self, service, name, info, rest, task_info=None):
        self.service = service
        self.name = name
        self.method = rest.http_method
        template = rest._url_template  # pylint: disable=protected-access
        self.template = template
        path, _sep, query = template.partition("?")
        self.path_template = path
        self.segments = [s for s in path.split("/") if s]
        self.fixed_query = {}
        for item in query.split("&") if query else []:
            key, eq, value = item.partition("=")
            self.fixed_query[key] = value if eq else None
        self.path_variables = dict(rest._path_variables)  # pylint: disable=protected-access
        # field name -> wire name
        self.query_parameters = dict(rest.query_parameters or {})
        self.headers = dict(rest._header_parameters or {})  # pylint: disable=protected-access
        self.body_parameter = rest.request_body_parameter
        described = info or task_info
        self.input_type = described["input_type"]
        self.errors = set(described.get("errors") or {})
        # the output of the plain call (None: the operation is only offered as a task)
        self.output_type = info["output_type"] if info else None
        # the task call answers the task id; the task's result has the result type
        self.task_output_type = task_info["output_type"] if task_info else None
        self.task_result_type = None
        if task_info:
            self.task_result_type = task_info.get("result_type") or self.output_type
        self.literal_segments = sum(1 for s in self.segments if not _is_var(s))

    @property
    def id(self):
        return "%s.%s" % (self.service, self.name)

    def match(self, method, segments, query):
        """The path variables {name: value} when the request is a call of this operation, else None."""
        if method != self.method or len(segments) != len(self.segments):
            return None
        values = {}
        for want, got in zip(self.segments, segments):
            if _is_var(want):
                values[want[1:-1]] = unquote(got)
            elif want != got:
                return None
        for key, value in self.fixed_query.items():
            if key not in query or (value is not None and query[key] != [value]):
                return None
        return values

    def __repr__(self):
        return "Operation(%s %s: %s)" % (self.method, self.template, self.id)


def _is_var(segment):
    return segment.startswith("{") and segment.endswith("}")


class _OfflineConnector:
    """A connector with no provider: stubs built on it only describe themselves."""

    @staticmethod
    def get_api_provider():
        return None


_INVOKE_TASK = re.compile(r"self\._invoke\('([^'$]+)\$task'")
_TASK_RESULT = re.compile(r"Task\(task_id, task_svc, (.+)\)\s*$", re.M)
_INTERFACE_STUB = re.compile(r"VapiInterface\.__init__\(self, config, (\w+)\)")


def _task_results(module):
    """{(stub class name, operation): result type of its task} as the interface classes declare it.

    A task's result type is not in the stub's tables: each ``<operation>_task`` method of the
    interface class wraps the task id in ``Task(task_id, task_svc, <result type>)``; that
    expression is read from the method and evaluated in the binding module.
    """
    from vmware.vapi.bindings.stub import VapiInterface

    out = {}
    # a copy of the module's names: a class's source read or a stub made can import, and an import binds names
    for cls in list(vars(module).values()):
        if not (inspect.isclass(cls) and issubclass(cls, VapiInterface) and cls.__module__ == module.__name__):
            continue
        stub = _INTERFACE_STUB.search(inspect.getsource(cls.__init__))
        if stub is None:
            continue
        for attr, method in vars(cls).items():
            if not (attr.endswith("_task") and inspect.isfunction(method)):
                continue
            source = inspect.getsource(method)
            op, result = _INVOKE_TASK.search(source), _TASK_RESULT.search(source)
            if op and result:
                out[(stub.group(1), op.group(1))] = eval(result.group(1), vars(module))  # pylint: disable=eval-used
    return out


def _binding_modules():
    import com.vmware  # the bindings' namespace package
    for found in pkgutil.walk_packages(com.vmware.__path__, "com.vmware."):
        if found.name.endswith("_client"):
            yield importlib.import_module(found.name)


def load(modules=None):
    """The contract of every operation of the installed bindings (or of ``modules``)."""
    with warnings.catch_warnings():
        # the runtime and the bindings warn at import about their own deprecations
        warnings.simplefilter("ignore", DeprecationWarning)
        return _load(modules)


def _load(modules):
    from vmware.vapi.bindings.stub import ApiInterfaceStub, StubConfiguration

    config = StubConfiguration(_OfflineConnector())
    operations = []
    for module in modules if modules is not None else _binding_modules():
        results = None
        for obj in list(vars(module).values()):  # a copy: making a stub can bind names in the module (see above)
            if not (inspect.isclass(obj) and issubclass(obj, ApiInterfaceStub) and obj is not ApiInterfaceStub
                    and obj.__module__ == module.__name__):
                continue
            stub = obj(config)
            service = stub.get_identifier().get_name()
            ops = stub._operations  # pylint: disable=protected-access
            for name, rest in (stub._rest_metadata or {}).items():  # pylint: disable=protected-access
                task = ops.get(name + "$task")
                if name in ops or task is not None:
                    # an operation offered only as a task has no plain form (info None)
                    if task is not None:
                        if results is None:
                            results = _task_results(module)
                        task = dict(task, result_type=results.get((obj.__name__, name)))
                    operations.append(Operation(service, name, ops.get(name), rest, task))
    return Contract(operations)


class Contract:
    """Operations by (method, template) and the checker of recorded exchanges."""

    def __init__(self, operations):
        self.operations = list(operations)
        self._by_method = {}
        for op in self.operations:
            self._by_method.setdefault(op.method, []).append(op)
        self.tasks = {}  # task id -> the operation that started it

    def __len__(self):
        return len(self.operations)

    def find(self, method, path, query=None):
        """(operation, path variables) of the most specific template matching, or (None, None)."""
        if not path.startswith(API_PREFIX + "/"):
            return None, None
        segments = [s for s in path[len(API_PREFIX):].split("/") if s]
        query = query or {}
        best, best_vars, best_score = None, None, None
        for op in self._by_method.get(method, []):
            values = op.match(method, segments, query)
            if values is None:
                continue
            score = (len(op.fixed_query), op.literal_segments)
            if best_score is None or score > best_score:
                best, best_vars, best_score = op, values, score
        return best, best_vars

    def operation_of(self, entry):
        """The operation a recorded exchange called, or None."""
        return self.find(entry["method"], entry["path"], _query(entry))[0]

    # --- one exchange ---------------------------------------------------------------------
    def check(self, entry):
        """The mismatches of one recorded exchange (a dict as the simulator logs it)."""
        method = entry["method"]
        path = entry["path"]
        raw_query = entry.get("query") or ""
        request = "%s %s%s" % (method, path, ("?" + raw_query) if raw_query else "")
        query = _query(entry)
        op, path_values = self.find(method, path, query)
        if op is None:
            return [Mismatch(request, "request", "no operation of the bindings has this method and URL")]
        out = []

        def bad(where, problem):
            out.append(Mismatch(request, where, problem))

        fields = _struct_fields(op.input_type)
        is_task = False
        if TASK_PARAM in query:
            if query[TASK_PARAM] != ["true"]:
                bad("query %s" % TASK_PARAM, "must be true, got %s" % query[TASK_PARAM])
            elif op.task_output_type is None:
                bad("query %s" % TASK_PARAM, "%s has no task form" % op.id)
            else:
                is_task = True
        elif op.output_type is None:
            bad("query %s" % TASK_PARAM, "%s is only offered as a task: %s=true is required" % (op.id, TASK_PARAM))
        # path variables
        wire_to_field = dict((v, k) for k, v in op.path_variables.items())
        for wire, value in path_values.items():
            field = wire_to_field.get(wire, wire)
            if field in fields:
                for problem in validate(value, fields[field], "path {%s}" % wire, text=True):
                    bad(*problem)
        # query parameters
        query_fields = dict((wire, field) for field, wire in op.query_parameters.items())
        flattened = _flattened_query_fields(op, fields)
        for key, values in query.items():
            if key == TASK_PARAM or key in op.fixed_query:
                continue
            field = query_fields.get(key)
            if field is None and key in flattened:
                ftype = flattened[key]
                value = values if _is_list(ftype) else values[-1]
                for problem in validate(value, ftype, "query %s" % key, text=True):
                    bad(*problem)
                continue
            if field is None:
                bad("query %s" % key, "not a parameter of %s (it takes %s)"
                    % (op.id, sorted(set(query_fields) | set(flattened)) or "none"))
                continue
            ftype = fields.get(field)
            if ftype is None:
                continue
            value = values if _is_list(ftype) else values[-1]
            for problem in validate(value, ftype, "query %s" % key, text=True):
                bad(*problem)
        for field, wire in op.query_parameters.items():
            if wire not in query and field in fields and not _is_optional(fields[field]):
                bad("query %s" % wire, "required by %s and missing" % op.id)
        # body
        body = entry.get("request_body")
        if entry.get("request_text"):
            bad("request body", "not JSON")
        elif op.body_parameter is not None:
            btype = fields.get(op.body_parameter)
            if body is None:
                if btype is not None and not _is_optional(btype):
                    bad("request body", "%s needs a body (%s)" % (op.id, op.body_parameter))
            else:
                for problem in validate(body, btype, "$"):
                    bad("request body " + problem[0], problem[1])
        else:
            taken = set(op.path_variables) | set(op.query_parameters) | set(op.headers)
            rest = dict((k, t) for k, t in fields.items() if k not in taken)
            if body is None:
                missing = sorted(k for k, t in rest.items() if not _is_optional(t))
                if missing:
                    bad("request body", "%s needs a body with %s" % (op.id, missing))
            elif not rest:
                if body not in ({}, None):
                    bad("request body", "%s takes no body" % op.id)
            else:
                for problem in _validate_fields(body, rest, "$", None):
                    bad("request body " + problem[0], problem[1])
        # the answer
        status = int(entry.get("status") or 0)
        answer = entry.get("response_body")
        if entry.get("response_text"):
            bad("response body", "not JSON: %r" % entry["response_text"][:80])
        elif 200 <= status < 300:
            out_type = op.task_output_type if is_task else op.output_type
            if out_type is None:
                pass  # reported above: a task-only operation called without vmw-task
            elif _is_void(out_type):
                if answer is not None:
                    bad("response body", "%s returns nothing, the answer has a body" % op.id)
            elif answer is None and not _is_optional(out_type):
                bad("response body", "%s returns a value, the answer has none" % op.id)
            else:
                for problem in validate(answer, out_type, "$"):
                    bad("response body " + problem[0], problem[1])
            if is_task and isinstance(answer, str):
                self.tasks[answer] = op
            if op.service == "com.vmware.cis.tasks" and op.name == "get" and isinstance(answer, dict):
                started = self.tasks.get(path_values.get("task"))
                if started is not None and answer.get("status") == "SUCCEEDED":
                    result = answer.get("result")
                    if _is_void(started.task_result_type):
                        if result is not None:
                            bad("response body $.result", "%s returns nothing, the task has a result" % started.id)
                    else:
                        for problem in validate(result, started.task_result_type, "$.result"):
                            bad("response body " + problem[0], "(result of %s) %s" % (started.id, problem[1]))
        elif status >= 400:
            for problem in _check_error(op, status, answer):
                bad(*problem)
        else:
            bad("status", "unexpected HTTP status %s" % status)
        return out

    def check_all(self, entries, exempt=None):
        """(mismatches, [(request, reason) of exempt requests]) of a list of exchanges."""
        exempt = NOT_IN_BINDINGS if exempt is None else exempt
        mismatches, skipped = [], []
        for entry in entries:
            key = "%s %s" % (entry["method"], entry["path"])
            reason = next((why for pattern, why in exempt.items() if re.fullmatch(pattern, key)), None)
            if reason is not None:
                skipped.append((key, reason))
                continue
            mismatches.extend(self.check(entry))
        return mismatches, skipped


def _query(entry):
    """{name: [values]} of an exchange's query string."""
    query = {}
    for key, value in parse_qsl(entry.get("query") or "", keep_blank_values=True):
        query.setdefault(key, []).append(value)
    return query


def read_log(path):
    """The exchanges of a simulator REST log (JSON lines)."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# --- types ------------------------------------------------------------------------------

def _types():
    from vmware.vapi.bindings import type as vtype
    return vtype


def _resolve(typ):
    vtype = _types()
    while isinstance(typ, vtype.ReferenceType):
        typ = typ.resolved_type
    return typ


def _is_optional(typ):
    return isinstance(_resolve(typ), _types().OptionalType)


def _is_void(typ):
    return isinstance(_resolve(typ), _types().VoidType)


def _is_list(typ):
    vtype = _types()
    typ = _resolve(typ)
    if isinstance(typ, vtype.OptionalType):
        typ = _resolve(typ.element_type)
    return isinstance(typ, (vtype.ListType, vtype.SetType))


def _struct_fields(typ):
    typ = _resolve(typ)
    return dict((name, typ.get_field(name)) for name in typ.get_field_names())


def _flattened_query_fields(op, fields):
    """{query name: type} of the fields of a GET's structure inputs that are neither path, query nor
    header parameters: the REST form of the vAPI sends them as query parameters named after the
    structure's own fields (direct_path_devices.list's ``filter_spec``, ``iteration_spec`` and
    ``list_details`` become ``page_size``, ``marker``, ``vm_class``, ...)."""
    if op.method != "GET" or op.body_parameter is not None:
        return {}
    vtype = _types()
    taken = set(op.path_variables) | set(op.query_parameters) | set(op.headers)
    out = {}
    for name, ftype in fields.items():
        if name in taken:
            continue
        inner = _resolve(ftype)
        if isinstance(inner, vtype.OptionalType):
            inner = _resolve(inner.element_type)
        if isinstance(inner, vtype.StructType):
            out.update(_struct_fields(inner))
    return out


def type_name(typ):
    """A readable name of a binding type."""
    vtype = _types()
    typ = _resolve(typ)
    if isinstance(typ, vtype.OptionalType):
        return "optional " + type_name(typ.element_type)
    if isinstance(typ, (vtype.ListType, vtype.SetType)):
        return "list of " + type_name(typ.element_type)
    if isinstance(typ, vtype.MapType):
        return "map of %s to %s" % (type_name(typ.key_type), type_name(typ.value_type))
    if isinstance(typ, (vtype.StructType, vtype.EnumType)):
        return typ.name
    return type(typ).__name__.replace("Type", "").lower() or "value"


def _enum_values(typ):
    return sorted(str(v) for v in typ.binding_class.get_values())


def _scalar_from_text(value, typ):
    """A query or path value (text) in the JSON form its type has, or raise ValueError."""
    vtype = _types()
    if isinstance(typ, vtype.IntegerType):
        return int(value)
    if isinstance(typ, vtype.DoubleType):
        return float(value)
    if isinstance(typ, vtype.BooleanType):
        if value not in ("true", "false"):
            raise ValueError(value)
        return value == "true"
    return value


def validate(value, typ, where, text=False):
    """[(where, problem)] of a JSON value against a binding type; ``text``: a path or query value."""
    vtype = _types()
    typ = _resolve(typ)
    problems = []
    if isinstance(typ, vtype.OptionalType):
        if value is None:
            return problems
        return validate(value, typ.element_type, where, text)
    if value is None:
        if isinstance(typ, (vtype.OpaqueType, vtype.VoidType)):
            return problems
        return [(where, "null where %s is required" % type_name(typ))]
    if isinstance(typ, (vtype.ListType, vtype.SetType)):
        if text and not isinstance(value, list):
            value = [value]
        if not isinstance(value, list):
            return [(where, "%s expected, got %s" % (type_name(typ), _json_kind(value)))]
        for i, item in enumerate(value):
            problems.extend(validate(item, typ.element_type, "%s[%d]" % (where, i), text))
        return problems
    if text:
        try:
            value = _scalar_from_text(value, typ)
        except ValueError:
            return [(where, "%r is not a %s" % (value, type_name(typ)))]
    if isinstance(typ, vtype.MapType):
        if not isinstance(value, dict):
            return [(where, "%s expected (a JSON object), got %s" % (type_name(typ), _json_kind(value)))]
        for key, item in value.items():
            problems.extend(validate(key, typ.key_type, "%s{key %r}" % (where, key), text=True))
            problems.extend(validate(item, typ.value_type, "%s.%s" % (where, key)))
        return problems
    if isinstance(typ, (vtype.StructType, vtype.ErrorType)) and not isinstance(typ, vtype.DynamicStructType):
        if not isinstance(value, dict):
            return [(where, "%s expected (a JSON object), got %s" % (type_name(typ), _json_kind(value)))]
        return _validate_fields(value, _struct_fields(typ), where, typ)
    if isinstance(typ, vtype.DynamicStructType):
        if not isinstance(value, dict):
            return [(where, "a structure (JSON object) expected, got %s" % _json_kind(value))]
        return problems
    if isinstance(typ, vtype.EnumType):
        if not isinstance(value, str):
            return [(where, "%s value (a string) expected, got %s" % (typ.name, _json_kind(value)))]
        allowed = _enum_values(typ)
        if value not in allowed:
            return [(where, "%r is not a value of %s (%s)" % (value, typ.name, ", ".join(allowed)))]
        return problems
    if isinstance(typ, (vtype.StringType, vtype.IdType, vtype.URIType, vtype.SecretType)):
        if not isinstance(value, str):
            return [(where, "%s (a string) expected, got %s" % (type_name(typ), _json_kind(value)))]
        return problems
    if isinstance(typ, vtype.BooleanType):
        if not isinstance(value, bool):
            return [(where, "boolean expected, got %s" % _json_kind(value))]
        return problems
    if isinstance(typ, vtype.IntegerType):
        if isinstance(value, bool) or not isinstance(value, int):
            return [(where, "integer expected, got %s" % _json_kind(value))]
        return problems
    if isinstance(typ, vtype.DoubleType):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return [(where, "number expected, got %s" % _json_kind(value))]
        return problems
    if isinstance(typ, vtype.DateTimeType):
        from vmware.vapi.bindings.datetime_helper import DateTimeConverter
        try:
            DateTimeConverter.convert_to_datetime(value)
        except Exception:  # pylint: disable=broad-except
            return [(where, "%r is not a date-time as the API writes it (RFC 3339)" % (value,))]
        return problems
    if isinstance(typ, vtype.BlobType):
        if not isinstance(value, str):
            return [(where, "binary (a base64 string) expected, got %s" % _json_kind(value))]
        return problems
    if isinstance(typ, vtype.AnyErrorType):
        if not isinstance(value, dict):
            return [(where, "an error (JSON object) expected, got %s" % _json_kind(value))]
        return _validate_error_body(value, where)
    if isinstance(typ, vtype.VoidType):
        return [(where, "no value expected, got %s" % _json_kind(value))]
    # OpaqueType and anything newer: any JSON value
    return problems


def _validate_fields(value, fields, where, typ):
    if not isinstance(value, dict):
        return [(where, "a JSON object expected, got %s" % _json_kind(value))]
    problems = []
    for key in sorted(value):
        if key not in fields:
            problems.append(("%s.%s" % (where, key), "unknown field (%s has %s)"
                             % (type_name(typ) if typ is not None else "the operation", ", ".join(sorted(fields)))))
    for name, ftype in sorted(fields.items()):
        if name not in value:
            if not _is_optional(ftype):
                problems.append(("%s.%s" % (where, name), "required field missing (%s)" % type_name(ftype)))
            continue
        problems.extend(validate(value[name], ftype, "%s.%s" % (where, name)))
    if typ is not None:
        problems.extend(_union_problems(value, typ, where))
    return problems


def _union_problems(value, typ, where):
    """The union rules of a struct (UnionValidator): a case's required fields, no other case's."""
    from vmware.vapi.data.validator import UnionValidator
    problems = []
    for validator in getattr(getattr(typ, "binding_class", None), "_validator_list", None) or []:
        if not isinstance(validator, UnionValidator):
            continue
        tag_name = validator._discriminant_name  # pylint: disable=protected-access
        cases = validator._case_map  # pylint: disable=protected-access
        tag = value.get(tag_name)
        allowed = dict(cases.get(tag, [])) if tag is not None else {}
        for field, required in allowed.items():
            if required and value.get(field) is None:
                problems.append(("%s.%s" % (where, field), "required when %s is %s" % (tag_name, tag)))
        for field in sorted(set(f for fields in cases.values() for f, _req in fields) - set(allowed)):
            if value.get(field) is not None:
                problems.append(("%s.%s" % (where, field), "not allowed when %s is %s" % (tag_name, tag)))
    return problems


def _error_struct():
    from com.vmware.vapi.std.errors_client import Error
    return Error.get_binding_type()


def _validate_error_body(value, where):
    problems = _validate_fields(value, _struct_fields(_error_struct()), where, _resolve(_error_struct()))
    return problems


def _check_error(op, status, answer):
    """An error answer: the standard error body, its type's HTTP status, declared by the operation."""
    from vmware.vapi.rest.lib import vapi_to_http_error_map
    if not isinstance(answer, dict):
        return [("response body", "an error answer must be a vAPI error object, got %s" % _json_kind(answer))]
    problems = [("response body " + w, p) for w, p in _validate_error_body(answer, "$")]
    kind = answer.get("error_type")
    if isinstance(kind, str):
        name = "com.vmware.vapi.std.errors." + kind.lower()
        mapped = vapi_to_http_error_map.get(name)
        if mapped is not None and mapped != status:
            problems.append(("status", "%s is HTTP %s, not %s" % (kind, mapped, status)))
        if name not in op.errors:
            problems.append(("response body $.error_type", "%s does not raise %s (it declares %s)"
                             % (op.id, kind, ", ".join(sorted(e.rsplit(".", 1)[-1].upper() for e in op.errors)))))
    return problems


def _json_kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean %s" % json.dumps(value)
    if isinstance(value, (int, float)):
        return "number %s" % json.dumps(value)
    if isinstance(value, str):
        return "string %s" % json.dumps(value[:40])
    if isinstance(value, list):
        return "array"
    return "object"
