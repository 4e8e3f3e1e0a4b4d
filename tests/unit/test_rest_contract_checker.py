"""The REST contract checker (tests/lib/rest_contract.py) against VMware's bindings: it finds the
operation of a request, accepts what the contract allows and names the request and the field
of what it does not (deliberately wrong bodies, answers, enum values, statuses and task results)."""
import pytest

from tests.lib import rest_contract

VMC = "/api/vcenter/namespace-management/virtual-machine-classes"
NS = "/api/vcenter/namespaces/instances"
SW = "/api/esx/settings/clusters/domain-c8/software"
NEW = "550.90.05-1OEM.800.1.0.20613240"


@pytest.fixture(scope="module")
def contract():
    return rest_contract.load()


def exchange(method, path, query="", body=None, status=200, answer=None):
    entry = {"method": method, "path": path, "query": query, "status": status}
    if body is not None:
        entry["request_body"] = body
    if answer is not None:
        entry["response_body"] = answer
    return entry


def problems(contract, *args, **kwargs):
    return [(m.where, m.problem) for m in contract.check(exchange(*args, **kwargs))]


GOOD_CLASS = {"id": "gpu-small", "cpu_count": 4, "memory_MB": 16384, "memory_reservation": 100,
              "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-1-10c"}]},
              "config_spec": {"_typeName": "VirtualMachineConfigSpec", "numCPUs": 4}}

CLASS_INFO = {"id": "gpu-small", "cpu_count": 4, "memory_MB": 16384, "description": "", "namespaces": [],
              "vms": [], "config_status": "READY", "messages": []}


def test_the_bindings_are_read_with_method_template_and_types(contract):
    assert len(contract) > 1000
    op, values = contract.find("PATCH", VMC + "/gpu-small")
    assert (op.id, op.method, op.template, values) == (
        "com.vmware.vcenter.namespace_management.virtual_machine_classes.update", "PATCH",
        "/vcenter/namespace-management/virtual-machine-classes/{vm_class}", {"vm_class": "gpu-small"})
    assert op.body_parameter == "spec"
    # a literal segment beats a path variable; a template's action must be in the query
    assert contract.find("GET", NS + "/v2")[0].name == "list_v2"
    assert contract.find("GET", NS + "/team-a")[0].name == "get"
    assert contract.find("POST", SW, {"action": ["apply"], "vmw-task": ["true"]})[0].name == "apply"
    assert contract.find("POST", SW, {"action": ["scan"]})[0].name == "scan"
    assert contract.find("POST", SW)[0] is None
    assert contract.find("GET", "/rest/com/vmware/cis/session")[0] is None
    # an operation offered only as a task, with the result type its task carries
    depot = contract.find("POST", "/api/esx/settings/depots/offline")[0]
    assert depot.output_type is None and rest_contract.type_name(depot.task_result_type).endswith("create_result")


def test_a_request_and_answer_as_the_contract_says_pass(contract):
    assert problems(contract, "POST", VMC, body=GOOD_CLASS, status=204) == []
    assert problems(contract, "GET", VMC + "/gpu-small", answer=CLASS_INFO) == []
    assert problems(contract, "GET", VMC, answer=[CLASS_INFO]) == []
    assert problems(contract, "POST", NS + "/team-a/access/example.com/team-a", "type=GROUP",
                    body={"role": "EDIT"}, status=204) == []
    assert problems(contract, "POST", "/api/session", status=201, answer="a1b2c3") == []


def test_a_wrong_field_name_is_named_with_its_path(contract):
    body = dict(GOOD_CLASS)
    body["memory_mb"] = body.pop("memory_MB")
    found = problems(contract, "POST", VMC, body=body, status=204)
    assert ("request body $.memory_mb", found[0][1]) == found[0] and "unknown field" in found[0][1]
    assert found[1] == ("request body $.memory_MB", "required field missing (integer)")
    assert len(found) == 2
    text = str(contract.check(exchange("POST", VMC, body=body, status=204))[0])
    assert text.startswith("POST %s: request body $.memory_mb: unknown field" % VMC)


def test_wrong_types_nested_fields_and_enum_values_are_caught(contract):
    body = dict(GOOD_CLASS, cpu_count="4", devices={"vgpu_devices": [{"profile": "nvidia_h100-1-10c"}]})
    found = dict(problems(contract, "POST", VMC, body=body, status=204))
    assert found["request body $.cpu_count"] == 'integer expected, got string "4"'
    assert "unknown field" in found["request body $.devices.vgpu_devices[0].profile"]
    assert found["request body $.devices.vgpu_devices[0].profile_name"].startswith("required field missing")
    found = dict(problems(contract, "POST", NS + "/team-a/access/example.com/bob", "type=ROBOT",
                          body={"role": "ADMIN"}, status=204))
    assert "'ROBOT' is not a value of" in found["query type"]
    assert "'ADMIN' is not a value of" in found["request body $.role"] and "EDIT, OWNER, VIEW" in found["request body $.role"]
    # a date-time the API would not parse
    found = dict(problems(contract, "GET", SW + "/compliance", answer={"scan_time": "30.11.2026 13:00"}))
    assert "not a date-time" in found["response body $.scan_time"]


def test_a_wrong_answer_is_caught(contract):
    info = dict(CLASS_INFO, memory_mb=CLASS_INFO["memory_MB"])
    del info["memory_MB"]
    found = problems(contract, "GET", VMC + "/gpu-small", answer=info)
    assert [w for w, _p in found] == ["response body $.memory_mb", "response body $.memory_MB"]
    # a compliance answer in a shape of our own: current/target are ComponentInfo objects
    host = {"status": "COMPLIANT", "impact": "NO_IMPACT", "notifications": {}, "scan_time": "2026-11-30T13:00:00.000Z",
            "base_image": {"status": "COMPLIANT", "current": {"version": "8.0.3"}, "target": {"version": "8.0.3"},
                           "notifications": {}},
            "add_on": {"status": "COMPLIANT", "notifications": {}}, "solutions": {},
            "components": {"NVD-AIE-800": {"status": "COMPLIANT", "notifications": {},
                                           "current": {"version": NEW}, "target": {"version": NEW}}}}
    answer = {"status": "COMPLIANT", "impact": "NO_IMPACT", "notifications": {}, "scan_time": "2026-11-30T13:00:00.000Z",
              "compliant_hosts": ["host-1"], "non_compliant_hosts": [], "incompatible_hosts": [],
              "unavailable_hosts": [], "hosts": {"host-1": host}, "host_info": {"host-1": {"name": "esx-01"}}}
    assert problems(contract, "GET", SW + "/compliance", answer=answer) == []
    host["components"]["NVD-AIE-800"]["target_version"] = NEW
    host["status"] = "GOOD"
    found = dict(problems(contract, "GET", SW + "/compliance", answer=answer))
    assert "unknown field" in found["response body $.hosts.host-1.components.NVD-AIE-800.target_version"]
    assert "'GOOD' is not a value of" in found["response body $.hosts.host-1.status"]
    # a void operation answered with a body, and an operation with an output answered without one
    assert problems(contract, "DELETE", VMC + "/gpu-small", status=204, answer={"ok": True}) == [
        ("response body", "com.vmware.vcenter.namespace_management.virtual_machine_classes.delete returns nothing, "
                          "the answer has a body")]
    assert problems(contract, "GET", VMC + "/gpu-small")[0][0] == "response body"


def test_urls_and_query_parameters_the_bindings_do_not_have_are_mismatches(contract):
    assert problems(contract, "POST", "/api/vcenter/namespace-management/vm-classes", body={}) == [
        ("request", "no operation of the bindings has this method and URL")]
    assert problems(contract, "PUT", VMC + "/gpu-small", body={}) == [
        ("request", "no operation of the bindings has this method and URL")]
    found = dict(problems(contract, "GET", VMC + "/gpu-small", "verbose=true", answer=CLASS_INFO))
    assert found["query verbose"].startswith("not a parameter of")
    # the access endpoints need the subject type
    assert ("query type", "required by com.vmware.vcenter.namespaces.access.create and missing") in problems(
        contract, "POST", NS + "/team-a/access/example.com/bob", body={"role": "EDIT"}, status=204)
    # a task-only operation called without vmw-task, a plain one with it
    found = dict(problems(contract, "POST", "/api/esx/settings/depots/offline",
                          body={"source_type": "PULL", "location": "https://x/y.zip"}, answer="1"))
    assert "only offered as a task" in found["query vmw-task"]
    found = dict(problems(contract, "POST", VMC, "vmw-task=true", body=GOOD_CLASS, status=204))
    assert "has no task form" in found["query vmw-task"]


def test_errors_must_be_standard_declared_and_of_their_status(contract):
    error = {"error_type": "NOT_FOUND", "messages": [{"id": "x", "default_message": "no class", "args": []}]}
    assert problems(contract, "GET", VMC + "/nope", status=404, answer=error) == []
    assert ("status", "NOT_FOUND is HTTP 404, not 400") in problems(contract, "GET", VMC + "/nope", status=400, answer=error)
    found = problems(contract, "GET", VMC + "/nope", status=400, answer=dict(error, error_type="ALREADY_EXISTS"))
    assert found[0][0] == "response body $.error_type" and "does not raise ALREADY_EXISTS" in found[0][1]
    found = dict(problems(contract, "GET", VMC + "/nope", status=404, answer={"error": "no class"}))
    assert "unknown field" in found["response body $.error"]
    assert found["response body $.messages"].startswith("required field missing")


def task_info(status="SUCCEEDED", result=None, **extra):
    info = {"description": {"id": "t", "default_message": "t", "args": []}, "service": "s", "operation": "o",
            "status": status, "cancelable": False, "start_time": "2026-11-30T13:00:00.000Z",
            "end_time": "2026-11-30T13:00:01.000Z",
            "progress": {"total": 1, "completed": 1, "message": {"id": "p", "default_message": "p", "args": []}}}
    if result is not None:
        info["result"] = result
    info.update(extra)
    return info


def test_a_task_result_is_checked_against_the_operation_that_started_it():
    contract = rest_contract.load()  # a fresh one: it remembers the tasks it saw started
    commit = exchange("POST", SW + "/drafts/7", "action=commit&vmw-task=true", body={"message": "m"}, answer="task-1")
    assert contract.check(commit) == []
    # the commit's result is the commit id (a string), not an object
    found = [(m.where, m.problem) for m in contract.check(
        exchange("GET", "/api/cis/tasks/task-1", answer=task_info(result={"commit": "8"})))]
    assert found == [("response body $.result", "(result of com.vmware.esx.settings.clusters.software.drafts.commit) "
                                                "id (a string) expected, got object")]
    assert contract.check(exchange("GET", "/api/cis/tasks/task-1", answer=task_info(result="8"))) == []
    # the task's own Info: required fields and the union rules of its status
    running = task_info(status="RUNNING")
    del running["progress"], running["end_time"], running["service"]
    found = dict((m.where, m.problem) for m in contract.check(exchange("GET", "/api/cis/tasks/task-1", answer=running)))
    assert found["response body $.service"] == "required field missing (id)"
    assert found["response body $.progress"] == "required when status is RUNNING"
    # a task this checker did not see started: only its Info is checked
    assert contract.check(exchange("GET", "/api/cis/tasks/other", answer=task_info(result={"any": 1}))) == []


def test_exempt_requests_are_listed_with_their_reason(contract):
    entries = [exchange("GET", "/rest/com/vmware/cis/session", answer={"value": {}}),
               exchange("GET", VMC + "/gpu-small", answer=CLASS_INFO)]
    mismatches, exempt = contract.check_all(entries, exempt={r"GET /rest/.*": "the older /rest API"})
    assert mismatches == [] and exempt == [("GET /rest/com/vmware/cis/session", "the older /rest API")]
    mismatches, exempt = contract.check_all(entries)
    assert [str(m) for m in mismatches] == [
        "GET /rest/com/vmware/cis/session: request: no operation of the bindings has this method and URL"]


def test_only_the_modules_given_are_read():
    from com.vmware.vcenter import namespace_management_client
    small = rest_contract.load([namespace_management_client])
    assert 0 < len(small) < 300
    assert small.find("POST", VMC)[0] is not None
    assert small.find("GET", SW)[0] is None


def test_a_gets_structure_inputs_are_read_as_flattened_query_parameters(contract):
    # direct_path_devices.list takes filter_spec, iteration_spec and list_details: on the wire
    # their fields are query parameters of their own names
    path = "/api/vcenter/host/host-21/hardware/direct-path-devices"
    answer = {"items": []}
    assert problems(contract, "GET", path, "page_size=100&marker=m1&vm_class=true", answer=answer) == []
    assert problems(contract, "GET", path, "page_size=ten", answer=answer) == [
        ("query page_size", "'ten' is not a integer")]
    (where, problem), = problems(contract, "GET", path, "bogus=1", answer=answer)
    assert where == "query bogus" and "page_size" in problem
