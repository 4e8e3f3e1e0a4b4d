"""Stand-ins under the vSphere clients' transport, for unit tests of what the clients do with each answer:

- ``response(status, body, headers)``: a requests Response as vCenter's REST API would send it;
- ``RestSession``: a requests session that logs in, stores every request and answers from a list;
- ``soap(*answers)``: a VsphereClient whose SOAP boundary (``_invoke``) runs over a pyvmomi stub that
  stores every call and answers from a list, with ``Mo`` and ``Info`` for the object and the method.

In both, the last answer repeats.
"""
import http.client
import threading

import requests
from requests.structures import CaseInsensitiveDict

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import RetryPolicy, VsphereClient, vmodl


def response(status, body=b"", headers=None):
    resp = requests.Response()
    resp.status_code = status
    resp._content = body  # pylint: disable=protected-access
    resp.reason = http.client.responses.get(status, "")
    resp.headers = CaseInsensitiveDict(headers or {})
    return resp


class RestSession:
    """Counts logins, stores every request as (method, path, JSON body) and answers each from `answers`;
    an exception among them is raised. A login after the first answers `login_status` when it is not 201."""

    def __init__(self, *answers, login_status=201):
        self.headers = {}
        self.answers = list(answers)
        self.sent = []
        self.logins = 0
        self.login_status = login_status

    def post(self, url, **kwargs):  # the login, pylint: disable=unused-argument
        self.logins += 1
        if self.logins > 1 and self.login_status != 201:
            return response(self.login_status)
        return response(201, b'"session-%d"' % self.logins)

    def request(self, method, url, **kwargs):
        self.sent.append((method, url.split(":443", 1)[1], kwargs.get("json")))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def delete(self, url, **kwargs):  # the logout, pylint: disable=unused-argument
        return response(204)


class Info:
    """The method info pyvmomi hands the stub: its WSDL name."""

    def __init__(self, name):
        self.wsdlName = name  # pylint: disable=invalid-name


class Mo:
    _moId = "host-21"


class Inner:
    """The pyvmomi stub under the boundary: stores each call's method name and answers from `answers`: a vSphere
    fault as a SOAP fault (status 500), another exception raised as the transport's, anything else as the result."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def InvokeMethod(self, mo, info, args, outer):  # noqa: N802 pylint: disable=invalid-name,unused-argument
        self.calls.append(info.wsdlName)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, vmodl.MethodFault):
            return 500, answer
        if isinstance(answer, Exception):
            raise answer
        return 200, answer


class Stub:
    def __init__(self, inner):
        self.inner = inner


def soap(*answers, retries=5):
    """A VsphereClient (no connection) over an Inner answering `answers`, retrying `retries` times without
    waiting; a re-login does nothing but count. Returns the client and the Inner."""
    client = VsphereClient.__new__(VsphereClient)
    client.retry = RetryPolicy(retries, 0, 0, lambda s: None)
    client._stub = Stub(Inner(*answers))  # pylint: disable=protected-access
    client._closing = False  # pylint: disable=protected-access
    client._session_generation = 0  # pylint: disable=protected-access
    client._login_lock = threading.Lock()  # pylint: disable=protected-access
    client.endpoint = "https://vc:443"
    client.relogins = 0
    client._relogin = lambda: None  # pylint: disable=protected-access
    return client, client._stub.inner  # pylint: disable=protected-access
