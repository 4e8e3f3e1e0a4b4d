# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vSphere SOAP client layer of gpupool.vcf (pyvmomi).

Knows nothing of Ansible: it raises :class:`VsphereError` and its subclasses, and the
module layer (``_vsphere_module.py``) turns them into ``fail_json``.

What it offers:

* one session per client (login once, logout on close), certificate verification on by
  default against the system trust store or a CA bundle the caller names;
* one fault boundary: every SOAP call of the session (methods and property reads, whatever
  object they are made on) goes through :class:`_BoundaryStub`. A vSphere fault becomes a
  :class:`VsphereFault` naming the operation and the object; an expired or killed session
  (``NotAuthenticated``: vCenter's answer after ``SessionManager.TerminateSession`` by an
  administrator, an idle-session timeout or a logout) is logged in again once and the call
  repeated; refused again right after that re-login (lost twice in a row), the call raises
  :class:`VsphereSessionLost`, which no waiter takes for "not there yet"; a dropped connection, a refused one (vCenter restarting) or a 5xx from a proxy is
  retried with bounded exponential backoff and jitter for reads; then one
  :class:`VsphereConnectionError` says what was attempted and how often;
* a change is sent once: a method that is not a read (``REPEATABLE_PREFIXES``) is repeated only
  when the connection was refused, as then nothing reached vCenter. Any other failure of a
  change (a 502, 503 or 504 from a proxy or load balancer, a reset or a timeout after the
  request was sent) may come after vCenter received it: a gateway that times out after it
  forwarded the request, a reset after vCenter read it. pyvmomi sends the whole request before
  it reads the answer and keeps no answer headers of a non-SOAP status (it raises
  ``HTTPException("503 Service Unavailable")``), so this layer cannot tell a 503 a proxy gave
  before forwarding (nor see a ``Retry-After``) from one given after: such a change raises
  :class:`VsphereOutcomeUnknown` ("may or may not have been carried out"), and the module
  reads the object again and reports what it found (``runner._runner``);
* :meth:`VsphereClient.retrieve`: exactly the named properties of every object of the
  given types, in one ContainerView and one PropertyCollector retrieval, whatever the
  number of objects (pages are followed with ContinueRetrievePropertiesEx); clusters and hosts
  in one retrieval alone (a traversal of the host folders, no view);
* :meth:`VsphereClient.retrieve_objects`: properties of a known list of objects in one
  retrieval;
* :func:`wait`: the one waiter (vSphere tasks, REST tasks, host reconnects, leases) with
  bounded exponential backoff, jitter and a deadline; transient errors while waiting do not
  end the wait before the deadline. A session lost during a wait is logged in again by the
  boundary and the wait goes on within the same deadline; a session lost twice in a row ends
  the wait at once with what was being waited for and that a plain rerun resumes;
* :func:`fault_message`: any vSphere fault as one readable line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket
import ssl
import threading
import time

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import backoff_delays

try:
    from http.client import HTTPException
except ImportError:  # pragma: no cover - Python 2 is not supported, kept for sanity tests
    HTTPException = OSError

try:
    from pyVim import connect
    from pyVmomi import vim, vmodl
    from pyVmomi.SoapAdapter import StubAdapterBase
    from pyVmomi.VmomiSupport import ManagedObject

    HAS_PYVMOMI = True
    PYVMOMI_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by the module layer
    HAS_PYVMOMI = False
    PYVMOMI_IMPORT_ERROR = exc
    vim = vmodl = connect = None
    ManagedObject = object
    StubAdapterBase = object

# the types a retrieval of the whole inventory reaches by a traversal of the host folders (no container view)
_HOST_TREE = (vim.ClusterComputeResource, vim.HostSystem) if HAS_PYVMOMI else ()

# SOAP methods that only read (or log in): repeated after a dropped connection or a 5xx
REPEATABLE_PREFIXES = ("Retrieve", "Fetch", "Query", "Continue", "Find", "Browse", "Current", "Has",
                       "CreateContainerView", "CreateListView", "DestroyView", "Login", "Logout",
                       # API 9.0: vCenter's vGPU capacity, a read
                       "DirectPathProfileManagerQueryCapacity")


class VsphereError(ClientError):
    """Any failure talking to vSphere; the message is meant for the user."""


class VsphereConnectionError(VsphereError):
    """Login, TLS or network failure (before any work, or after the retries ran out)."""


class VsphereOutcomeUnknown(VsphereConnectionError):
    """A change was sent, and the answer that would say whether vCenter carried it out was lost
    (a gateway's 502/503/504, a reset or a timeout after sending). It was not repeated: the
    caller reads the object again to learn what happened (``outcome_unknown``)."""

    outcome_unknown = True


class VsphereSessionLost(VsphereConnectionError):
    """vCenter refused the session (``NotAuthenticated``, REST 401) again right after a re-login,
    or the re-login itself failed: the session was lost twice in a row. Not a transient fault: a
    waiter ends at once (it does not take it for a host or a task that is not back yet)."""

    session_lost = True


class VsphereTaskError(VsphereError):
    """A vSphere task ended in error or did not end in time."""


class VsphereNotFound(VsphereError):
    """A named object (cluster, host, VM) does not exist."""


class VsphereFault(VsphereError):
    """A vSphere fault answered to one call; ``fault`` is the pyvmomi fault object."""

    def __init__(self, fault, operation=None, target=None):
        self.fault = fault
        self.operation = operation
        self.target = target
        text = fault_message(fault)
        if operation:
            text = "%s%s: %s" % (operation, (" on %s" % target) if target else "", text)
        super(VsphereFault, self).__init__(text)

    def is_a(self, *fault_types):
        """Whether the fault is one of the given pyvmomi fault types."""
        return isinstance(self.fault, fault_types)


def fault_message(fault):
    """One line describing a vSphere fault (or any exception)."""
    if fault is None:
        return "unknown error"
    parts = []
    msg = getattr(fault, "msg", None)
    if msg:
        parts.append(str(msg).strip())
    for item in getattr(fault, "faultMessage", None) or []:
        text = getattr(item, "message", None)
        if text and text not in parts:
            parts.append(text.strip())
    name = type(fault).__name__
    if hasattr(fault, "_wsdlName"):
        name = fault._wsdlName
    if not parts:
        parts.append(str(fault).strip() or name)
    text = "; ".join(parts)
    if name and name not in ("Exception", "str") and name not in text:
        text = "%s (%s)" % (text, name)
    return text


def ca_bundle(ca_file=None):
    """The CA bundle used to verify vCenter: the named file, else the standard variables."""
    for candidate in (ca_file, os.environ.get("REQUESTS_CA_BUNDLE"), os.environ.get("SSL_CERT_FILE")):
        if candidate:
            return candidate
    return None


def ssl_context(validate_certs=True, ca_file=None):
    """TLS context: verifying by default, against ``ca_bundle(ca_file)`` or the system store."""
    if not validate_certs:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    bundle = ca_bundle(ca_file)
    if bundle and not os.path.exists(bundle):
        raise VsphereConnectionError("CA bundle %s does not exist" % bundle)
    return ssl.create_default_context(cafile=bundle)


class RetryPolicy:
    """How a client repeats calls after transient failures: at most ``retries`` times, with
    delays from ``delay`` seconds doubled up to ``max_delay``, with jitter. ``retried``
    counts the repeats of the client's life (figures and tests)."""

    def __init__(self, retries=5, delay=1.0, max_delay=30.0, sleep=time.sleep):
        self.retries = max(0, int(retries))
        self.delay = delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.retried = 0

    def start(self):
        """The budget of one call."""
        return _Attempts(self)


class _Attempts:
    """One call's repeats under a :class:`RetryPolicy`."""

    def __init__(self, policy):
        self.policy = policy
        self.count = 0
        self._delays = backoff_delays(policy.delay, policy.max_delay)

    def left(self):
        return self.count < self.policy.retries

    def pause(self):
        """Count a repeat and sleep before it (the backoff's next delay)."""
        self.pause_for(next(self._delays))

    def pause_for(self, seconds):
        """Count a repeat and sleep ``seconds`` before it (a delay the server asked for)."""
        self.count += 1
        self.policy.retried += 1
        self.policy.sleep(seconds)


def wait(check, timeout, what, transient=(), initial_delay=0.2, max_delay=5.0,
         sleep=time.sleep, clock=time.monotonic):
    """The one waiter: call ``check()`` until it returns ``(True, value)``; return ``value``.

    ``check`` returns ``(done, value)`` or ``(False, state text)``. An exception of a type in
    ``transient`` (vCenter restarting, a proxy answering 503) does not end the wait before the
    deadline; the last one is named if the deadline passes. Delays grow exponentially with
    jitter up to ``max_delay``. A session the client's boundary logged in again once is no
    fault here; :class:`VsphereSessionLost` (lost twice in a row) ends the wait at once, naming
    ``what``, whatever ``transient`` says.
    """
    deadline = clock() + timeout
    delays = backoff_delays(initial_delay, max_delay)
    state = "not started"
    while True:
        try:
            done, value = check()
            if done:
                return value
            state = value
        except VsphereSessionLost as exc:
            raise session_lost_during(exc, what)
        except transient as exc:  # pylint: disable=catching-non-exception
            if getattr(exc, "outcome_unknown", False):
                raise  # a change inside the check, sent once: calling the check again would repeat it
            state = "unreachable: %s" % exc
        if clock() >= deadline:
            raise VsphereTaskError("%s did not finish within %ss (last state: %s)" % (what, timeout, state))
        sleep(min(next(delays), max(0.0, deadline - clock()) or initial_delay))


def session_lost_during(exc, what):
    """The :class:`VsphereSessionLost` a waiter raises: what it waited for and what to do next
    (an error already named by an inner waiter is kept as it is)."""
    if getattr(exc, "waited_for", None):
        return exc
    lost = VsphereSessionLost("the vCenter session was lost twice in a row while waiting for %s (%s); "
                              "what was being waited for may still be under way in vCenter: "
                              "a plain rerun reads the state and resumes" % (what, exc))
    lost.waited_for = what
    return lost


def _transient(exc):
    """Connection refused or reset, a timeout, or a 5xx from a proxy: worth another try."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return False
    if isinstance(exc, HTTPException):
        return str(exc)[:1] == "5" or not str(exc)[:3].isdigit()
    return isinstance(exc, (ConnectionError, socket.timeout, TimeoutError, OSError))


def _unsent(exc):
    """Whether the request cannot have reached vCenter (so a change may be repeated): only a
    refused connection. A 5xx status (pyvmomi's ``HTTPException``) or a reset may come after
    vCenter received the request (see the module docstring)."""
    return isinstance(exc, ConnectionRefusedError)


def _is_read(operation):
    return operation.startswith(REPEATABLE_PREFIXES)


def _target(mo):
    """'HostSystem host-21' for a managed object reference."""
    if mo is None:
        return None
    kind = getattr(type(mo), "_wsdlName", None) or type(mo).__name__.split(".")[-1]
    return "%s %s" % (kind, getattr(mo, "_moId", "?"))


class _BoundaryStub(StubAdapterBase):  # pylint: disable=too-few-public-methods
    """The SOAP stub every object of a :class:`VsphereClient` session is bound to.

    pyvmomi binds each managed object it deserializes to the stub that made the call, so
    objects read through this stub call back through it: every method and property read
    of the session passes :meth:`VsphereClient._invoke`.
    """

    def __init__(self, inner, client):
        self.inner = inner
        self.client = client
        StubAdapterBase.__init__(self, version=inner.version)

    def InvokeMethod(self, mo, info, args):  # noqa: N802 - pyvmomi's name
        return self.client._invoke(mo, info, args, self)  # pylint: disable=protected-access

    def __getattr__(self, name):
        if name in ("inner", "client"):  # not set yet: no delegation loop
            raise AttributeError(name)
        return getattr(self.inner, name)


class ObjectProps:
    """One object of a retrieval: its reference and the properties that were set."""

    __slots__ = ("obj", "props")

    def __init__(self, obj, props):
        self.obj = obj
        self.props = props

    @property
    def moid(self):
        return self.obj._moId

    def get(self, name, default=None):
        return self.props.get(name, default)

    def __getitem__(self, name):
        return self.props[name]

    def __repr__(self):
        return "ObjectProps(%s, %r)" % (self.moid, sorted(self.props))


def _login(hostname, port, username, password, ctx, timeout):
    """(stub, service content) of a new session: the version read, one RetrieveServiceContent, one Login.

    What ``SmartConnect`` sends; the content is given back so that the session does
    not read it again (one request fewer in every module call)."""
    stub = connect.SmartStubAdapter(host=hostname, port=port, sslContext=ctx, httpConnectionTimeout=timeout)
    content = vim.ServiceInstance("ServiceInstance", stub).RetrieveContent()
    content.sessionManager.Login(username, password, None)
    return stub, content


def _rebound(content, stub):
    """The service content with its managed object references bound to ``stub`` (no request)."""
    for prop in content._GetPropertyList():  # pylint: disable=protected-access
        value = getattr(content, prop.name, None)
        if isinstance(value, ManagedObject):
            setattr(content, prop.name, type(value)(value._moId, stub))  # pylint: disable=protected-access
    return content


def _host_tree_traversal(hosts):
    """The selection from the root folder through every folder and datacenter to the host folders' clusters
    (and compute resources), and with ``hosts`` on to their hosts: what a recursive container view of the root
    folder holds of those types, in the retrieval itself (no view to create and destroy)."""
    pc = vmodl.query.PropertyCollector
    down = [pc.SelectionSpec(name="folderChildren"), pc.SelectionSpec(name="datacenterHosts")]
    if hosts:
        down.append(pc.SelectionSpec(name="computeHosts"))
    specs = [pc.TraversalSpec(name="folderChildren", type=vim.Folder, path="childEntity", skip=False, selectSet=down),
             pc.TraversalSpec(name="datacenterHosts", type=vim.Datacenter, path="hostFolder", skip=False,
                              selectSet=[pc.SelectionSpec(name="folderChildren")])]
    if hosts:
        specs.append(pc.TraversalSpec(name="computeHosts", type=vim.ComputeResource, path="host", skip=False))
    return specs


def _connected(call, endpoint, username, policy, what="login to"):
    """``call()`` (a login, or the service content's read), retried while vCenter refuses connections
    (restarting) as ``policy`` says; then a clear VsphereConnectionError."""
    attempts = policy.start()
    while True:
        try:
            return call()
        except vim.fault.InvalidLogin:
            raise VsphereConnectionError(
                "login to %s refused: invalid user name or password for %s" % (endpoint, username))
        except ssl.SSLCertVerificationError as exc:
            raise VsphereConnectionError(
                "TLS certificate of %s not trusted (%s); name its CA with ca_file, VMWARE_CA_FILE, "
                "REQUESTS_CA_BUNDLE or SSL_CERT_FILE, or add it to the system trust store"
                % (endpoint, exc.verify_message or exc))
        except vmodl.MethodFault as exc:
            raise VsphereConnectionError("%s %s failed: %s" % (what, endpoint, fault_message(exc)))
        except (OSError, ssl.SSLError, HTTPException) as exc:
            if not attempts.left() or not _transient(exc):
                raise VsphereConnectionError("cannot reach %s: %s (%d attempts)" % (endpoint, exc, attempts.count + 1))
        attempts.pause()


def service_api_version(hostname, port=443, validate_certs=True, ca_file=None, timeout=60, retries=5):
    """The vCenter's API version (``About.apiVersion``, '8.0.3.0') from its service content, read without a
    session: what ``SmartConnect`` reads before it logs in (the version file and one RetrieveServiceContent),
    and no Login or Logout, for callers that need the version alone."""
    if not HAS_PYVMOMI:
        raise VsphereConnectionError("pyvmomi is required: %s" % PYVMOMI_IMPORT_ERROR)
    if not hostname:
        raise VsphereConnectionError("no vCenter host name given (option hostname or VMWARE_HOST)")
    port = int(port or 443)
    ctx = ssl_context(validate_certs, ca_file)

    def read():
        stub = connect.SmartStubAdapter(host=hostname, port=port, sslContext=ctx, httpConnectionTimeout=timeout)
        return vim.ServiceInstance("ServiceInstance", stub).RetrieveContent().about.apiVersion

    return _connected(read, "https://%s:%d" % (hostname, port), None, RetryPolicy(retries),
                      what="the service content read of")


class VsphereClient:
    """A logged-in vSphere session. Use as a context manager, or call :meth:`close`.

    ``retries``: how often a call is repeated after a transient failure (dropped or refused
    connection, 5xx from a proxy) and how often the session is logged in again after
    ``NotAuthenticated``; delays grow from ``retry_delay`` seconds, doubled each time up to
    ``max_retry_delay``, with jitter.
    """

    def __init__(self, hostname, username, password, port=443, validate_certs=True,
                 ca_file=None, timeout=60, retries=5, retry_delay=1.0, max_retry_delay=30.0,
                 sleep=time.sleep):
        if not HAS_PYVMOMI:
            raise VsphereConnectionError("pyvmomi is required: %s" % PYVMOMI_IMPORT_ERROR)
        if not hostname:
            raise VsphereConnectionError("no vCenter host name given (option hostname or VMWARE_HOST)")
        if not username or password is None:
            raise VsphereConnectionError(
                "no credentials given (options username/password or VMWARE_USER/VMWARE_PASSWORD)")
        self.hostname = hostname
        self.port = int(port or 443)
        self.endpoint = "https://%s:%d" % (hostname, self.port)
        self.retry = RetryPolicy(retries, retry_delay, max_retry_delay, sleep)
        self.relogins = 0
        self._credentials = (username, password)
        self._closing = False
        self._fields = None
        # concurrent calls (per-host reads run in threads) log in again once, not once each
        self._login_lock = threading.Lock()
        self._session_generation = 0
        ctx = ssl_context(validate_certs, ca_file)
        # no version is named: SmartStubAdapter reads /sdk/vimServiceVersions.xml and takes the newest
        # version both pyvmomi and vCenter know (8.0.3.0 on vCenter 8.0 U3, 9.0.0.0 on 9.0)
        stub, content = self._connect(lambda: _login(hostname, self.port, username, password, ctx, timeout))
        # every object read from here on is bound to the boundary stub (see _BoundaryStub); the
        # service content of the login is kept, bound to it, rather than read a second time
        self._stub = _BoundaryStub(stub, self)
        self.si = vim.ServiceInstance("ServiceInstance", self._stub)
        self.content = _rebound(content, self._stub)

    def _connect(self, login):
        """Log in, retrying while vCenter refuses connections (restarting), then fail clearly."""
        return _connected(login, self.endpoint, self._credentials[0], self.retry)

    # -- the fault boundary ----------------------------------------------------------------
    def _invoke(self, mo, info, args, outer):
        """One SOAP call through the boundary: re-login, bounded retries, one error type."""
        operation = info.wsdlName
        if operation == "Fetch" and args:
            operation = "read of %s" % args[0]
        read = _is_read(info.wsdlName)
        attempts = self.retry.start()
        relogins = 0
        while True:
            generation = self._session_generation
            try:
                status, obj = self._stub.inner.InvokeMethod(mo, info, args, outer)
            except (OSError, HTTPException) as exc:
                unsent = _unsent(exc)
                if self._closing or not attempts.left() or not (_transient(exc) and (read or unsent)):
                    unknown = not (read or unsent) and _transient(exc)  # a change that may have reached vCenter
                    error = VsphereOutcomeUnknown if unknown else VsphereConnectionError
                    raise error(self._transport_text(operation, mo, exc, attempts.count, not unknown))
                attempts.pause()
                continue
            if status == 200:
                return obj
            if isinstance(obj, vim.fault.NotAuthenticated) and info.wsdlName not in ("Login", "Logout") and not self._closing:
                # one re-login per call: refused again right after it, the session is lost twice in a row
                if relogins >= min(1, self.retry.retries):
                    raise VsphereSessionLost(
                        "%s on %s: the session was refused (NotAuthenticated) again after %d re-logins to %s"
                        % (operation, _target(mo), relogins, self.endpoint))
                relogins += 1
                with self._login_lock:
                    if generation == self._session_generation:  # nobody logged in meanwhile
                        self.relogins += 1
                        self._relogin()
                        self._session_generation += 1
                continue
            if isinstance(obj, Exception):
                raise VsphereFault(obj, operation, _target(mo))
            raise VsphereError("%s on %s: unexpected answer %r" % (operation, _target(mo), obj))

    def _relogin(self):
        """A new session on the same stub: objects already read stay usable. A refused login
        raises :class:`VsphereSessionLost`; a connection failure during it stays a
        :class:`VsphereConnectionError` (vCenter restarting: a waiter goes on)."""
        user, password = self._credentials
        try:
            self.content.sessionManager.Login(userName=user, password=password)
        except VsphereFault as exc:  # vCenter answered and refused: not a transient fault
            raise VsphereSessionLost("re-login to %s after the session was refused (NotAuthenticated) failed: %s"
                                     % (self.endpoint, exc))

    def _transport_text(self, operation, mo, exc, attempts, retried):
        if isinstance(exc, HTTPException) and str(exc)[:3].isdigit():  # a proxy's status, not vCenter's SOAP answer
            text = "%s on %s: %s answered HTTP %s" % (operation, _target(mo), self.endpoint, exc)
        else:
            text = "%s on %s: connection to %s failed (%s)" % (operation, _target(mo), self.endpoint,
                                                               exc or type(exc).__name__)
        if attempts:
            text += " after %d attempts" % (attempts + 1)
        if not retried:
            text += ("; the request may or may not have been carried out, so it was not repeated: "
                     "a rerun reads the state and resumes")
        return text

    # -- lifecycle -----------------------------------------------------------------------
    def close(self):
        if getattr(self, "si", None) is not None:
            self._closing = True
            try:
                self.content.sessionManager.Logout()
            except Exception:  # logout is best effort: the session expires on its own
                pass
            self.si = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- reading -------------------------------------------------------------------------
    def retrieve(self, specs, root=None, fields=False):
        """Properties of every object of the given types under ``root`` (default: all).

        ``specs`` maps a managed object type (``vim.HostSystem``) to the property paths
        wanted. Returns a list of :class:`ObjectProps`. Requests: CreateContainerView,
        RetrievePropertiesEx (+ Continue per extra page), DestroyView; the hosts alone of a cluster
        are one RetrievePropertiesEx (a traversal of its ``host``), and so are the clusters or hosts
        of the whole inventory (a traversal of the folders, datacenters' host folders and compute
        resources from the root folder, as the cluster lookup by name makes). ``fields``: the custom
        attribute definitions come in the same retrieval (kept for :meth:`custom_field_key`, not
        returned) where the session has not read them yet, rather than in one of their own.
        """
        pc = vmodl.query.PropertyCollector
        view = None
        wanted = tuple(specs)
        if isinstance(root, vim.ClusterComputeResource) and list(specs) == [vim.HostSystem]:
            # a cluster's hosts are its ``host`` property: one traversal, no view to create and destroy
            obj_specs = [pc.ObjectSpec(obj=root, skip=True, selectSet=[
                pc.TraversalSpec(name="clusterHosts", type=vim.ClusterComputeResource, path="host", skip=False)])]
        elif root is None and specs and all(t in _HOST_TREE for t in specs):
            # clusters and hosts sit in the datacenters' host folders: one traversal from the root folder, no view
            obj_specs = self.host_tree(hosts=vim.HostSystem in specs)
        else:
            view = self.content.viewManager.CreateContainerView(
                root or self.content.rootFolder, list(specs), True)
            traversal = pc.TraversalSpec(name="view", path="view", skip=False,
                                         type=vim.view.ContainerView)
            obj_specs = [pc.ObjectSpec(obj=view, skip=True, selectSet=[traversal])]
        try:
            manager = self.content.customFieldsManager if fields and self._fields is None else None
            if manager is None:
                # a traversal also passes folders, datacenters and compute resources: only the wanted types are given
                return [item for item in self.collect(obj_spec_list=obj_specs, specs=specs)
                        if isinstance(item.obj, wanted)]
            obj_specs.append(pc.ObjectSpec(obj=manager, skip=False))
            with_fields = dict(specs)
            with_fields[vim.CustomFieldsManager] = ["field"]
            objects = self.collect(obj_spec_list=obj_specs, specs=with_fields)
            out = []
            for item in objects:
                if isinstance(item.obj, vim.CustomFieldsManager):
                    self.know_custom_fields(item.get("field"))
                elif isinstance(item.obj, wanted):
                    out.append(item)
            return out
        finally:
            try:
                if view is not None:
                    view.DestroyView()
            except VsphereError:  # the view dies with the session anyway
                pass

    def host_tree(self, hosts=False):
        """The object specs of a retrieval of every cluster (and with ``hosts`` every host) of the inventory: the
        root folder, traversed through the folders, the datacenters' host folders (and the compute resources'
        hosts). What a recursive container view of the root folder holds of those types, without the view;
        the objects passed on the way (folders, datacenters) have no property asked and are not returned."""
        pc = vmodl.query.PropertyCollector
        return [pc.ObjectSpec(obj=self.content.rootFolder, skip=True, selectSet=_host_tree_traversal(hosts))]

    def retrieve_objects(self, objs, properties):
        """Properties of a known list of objects of one type, in one retrieval."""
        objs = list(objs)
        if not objs:
            return []
        pc = vmodl.query.PropertyCollector
        obj_specs = [pc.ObjectSpec(obj=o, skip=False) for o in objs]
        return self.collect(obj_spec_list=obj_specs, specs={type(objs[0]): properties})

    def collect(self, obj_spec_list, specs):
        """One retrieval of the properties ``specs`` ({type: [paths]}) over the given object specs
        (with their traversals): for a read that follows references the other two cannot express."""
        pc = vmodl.query.PropertyCollector
        prop_specs = [pc.PropertySpec(type=t, pathSet=list(paths), all=False) for t, paths in specs.items()]
        filter_spec = pc.FilterSpec(objectSet=obj_spec_list, propSet=prop_specs)
        collector = self.content.propertyCollector
        result = collector.RetrievePropertiesEx(specSet=[filter_spec], options=pc.RetrieveOptions())
        out = []
        while result is not None:
            for item in result.objects or []:
                out.append(ObjectProps(item.obj, dict((p.name, p.val) for p in item.propSet or [])))
            if not result.token:
                break
            result = collector.ContinueRetrievePropertiesEx(token=result.token)
        return out

    # -- tasks ---------------------------------------------------------------------------
    def wait_for_task(self, task, timeout=600, what="task", initial_delay=0.1, max_delay=5.0,
                      sleep=time.sleep, clock=time.monotonic):
        """Wait for a task to end; return its result or raise :class:`VsphereTaskError`.

        A vCenter that restarts during the wait (connection refused) does not end the wait
        before ``timeout``; a session ended meanwhile (``TerminateSession``) is logged in again
        once and the wait goes on; a task vCenter no longer knows ends it.
        """
        def check():
            try:
                info = task.info
            except VsphereFault as exc:
                if exc.is_a(vmodl.fault.ManagedObjectNotFound):
                    raise VsphereTaskError("%s: vCenter no longer knows task %s (%s); a rerun reads the state and resumes"
                                           % (what, getattr(task, "_moId", "?"), exc))
                raise VsphereTaskError("%s: cannot read task state: %s" % (what, exc))
            if info.state == "success":
                return True, info.result
            if info.state == "error":
                raise VsphereTaskError("%s failed: %s" % (what, fault_message(info.error)))
            return False, "%s%s" % (info.state, (", %s%%" % info.progress) if info.progress is not None else "")

        return wait(check, timeout, what, transient=(VsphereConnectionError,), initial_delay=initial_delay,
                    max_delay=max_delay, sleep=sleep, clock=clock)

    # -- custom attributes (what the collection records on vCenter objects) ---------------
    def know_custom_fields(self, field_defs):
        """The custom attribute definitions, read by the caller in a retrieval of its own."""
        self._fields = list(field_defs or [])

    def custom_field_key(self, name, mo_type, create=False):
        """Key of the custom attribute ``name`` for objects of ``mo_type`` (None when absent).

        A definition for ``mo_type`` wins over a global one of that name. The definitions are
        read once per session (one retrieval, or :meth:`know_custom_fields`); ``create`` adds
        the definition when it is missing (a definition made meanwhile by a parallel run is found).
        """
        if self._fields is None:
            manager = self.content.customFieldsManager
            got = self.retrieve_objects([manager], ["field"])
            self._fields = list(got[0].get("field") or []) if got else []
        found = None
        for field in self._fields:
            if field.name == name and field.managedObjectType == mo_type:
                return field.key
            if field.name == name and field.managedObjectType is None:
                found = field.key
        if found is not None or not create:
            return found
        try:
            field = self.content.customFieldsManager.AddCustomFieldDef(name=name, moType=mo_type)
        except VsphereFault as exc:
            if not exc.is_a(vim.fault.DuplicateName):
                raise
            self._fields = None
            key = self.custom_field_key(name, mo_type)
            if key is None:
                raise VsphereError("custom attribute %s exists, but not for %s objects"
                                   % (name, getattr(mo_type, "_wsdlName", mo_type)))
            return key
        self._fields.append(field)
        return field.key

    def set_custom_field(self, entity, name, value):
        """Write the custom attribute ``name`` of ``entity`` (defined on first use)."""
        key = self.custom_field_key(name, type(entity), create=True)
        self.content.customFieldsManager.SetField(entity=entity, key=key, value=value)

    @staticmethod
    def custom_value(values, key):
        """The value of custom attribute ``key`` in an object's ``customValue`` ("" when unset)."""
        for item in values or []:
            if key is not None and item.key == key:
                return getattr(item, "value", "") or ""
        return ""

    # -- helpers for modules -------------------------------------------------------------
    def clusters_by_name(self):
        """{cluster name: ObjectProps(name, host)} for every cluster, in one retrieval."""
        return dict((c["name"], c) for c in self.retrieve({vim.ClusterComputeResource: ["name", "host"]}))

    @staticmethod
    def cluster_named(name, clusters):
        """The entry of ``clusters_by_name()`` for ``name``, or VsphereNotFound listing the clusters."""
        if name not in clusters:
            raise VsphereNotFound("cluster %s not found; clusters: %s" % (name, ", ".join(sorted(clusters)) or "none"))
        return clusters[name]
