# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vSphere SOAP client layer of gpupool.vcf (pyvmomi).

Knows nothing of Ansible: it raises :class:`VsphereError` and its subclasses, and the
module layer (``_vsphere_module.py``) turns them into ``fail_json``.

What it offers:

* one session per client (login once, logout on close), certificate verification on by
  default against the system trust store or a CA bundle the caller names;
* :meth:`VsphereClient.retrieve`: exactly the named properties of every object of the
  given types, in one ContainerView and one PropertyCollector retrieval, whatever the
  number of objects (pages are followed with ContinueRetrievePropertiesEx);
* :meth:`VsphereClient.retrieve_objects`: properties of a known list of objects in one
  retrieval;
* :meth:`VsphereClient.wait_for_task`: one task waiter with exponential backoff and a
  timeout;
* :func:`fault_message`: any vSphere fault as one readable line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import ssl
import time

try:
    from pyVim import connect
    from pyVmomi import vim, vmodl

    HAS_PYVMOMI = True
    PYVMOMI_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by the module layer
    HAS_PYVMOMI = False
    PYVMOMI_IMPORT_ERROR = exc
    vim = vmodl = connect = None

# vSphere 8.0 U3: newer data types (vGPU profile info, graphics config) come back typed
DEFAULT_API_VERSION = "vim.version.v8_0_3_0"


class VsphereError(Exception):
    """Any failure talking to vSphere; the message is meant for the user."""


class VsphereConnectionError(VsphereError):
    """Login, TLS or network failure before any work is done."""


class VsphereTaskError(VsphereError):
    """A vSphere task ended in error or did not end in time."""


class VsphereNotFound(VsphereError):
    """A named object (cluster, host, VM) does not exist."""


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


class VsphereClient:
    """A logged-in vSphere session. Use as a context manager, or call :meth:`close`."""

    def __init__(self, hostname, username, password, port=443, validate_certs=True,
                 ca_file=None, timeout=60):
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
        ctx = ssl_context(validate_certs, ca_file)
        try:
            self.si = connect.SmartConnect(host=hostname, user=username, pwd=password,
                                           port=self.port, sslContext=ctx,
                                           httpConnectionTimeout=timeout)
        except vim.fault.InvalidLogin:
            raise VsphereConnectionError(
                "login to %s refused: invalid user name or password for %s" % (self.endpoint, username))
        except ssl.SSLCertVerificationError as exc:
            raise VsphereConnectionError(
                "TLS certificate of %s not trusted (%s); name its CA with ca_file, VMWARE_CA_FILE, "
                "REQUESTS_CA_BUNDLE or SSL_CERT_FILE, or add it to the system trust store"
                % (self.endpoint, exc.verify_message or exc))
        except vmodl.MethodFault as exc:
            raise VsphereConnectionError("login to %s failed: %s" % (self.endpoint, fault_message(exc)))
        except (OSError, ssl.SSLError) as exc:
            raise VsphereConnectionError("cannot reach %s: %s" % (self.endpoint, exc))
        self.content = self.si.RetrieveContent()

    # -- lifecycle -----------------------------------------------------------------------
    def close(self):
        if getattr(self, "si", None) is not None:
            try:
                connect.Disconnect(self.si)
            except Exception:  # logout is best effort: the session expires on its own
                pass
            self.si = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- reading -------------------------------------------------------------------------
    def retrieve(self, specs, root=None):
        """Properties of every object of the given types under ``root`` (default: all).

        ``specs`` maps a managed object type (``vim.HostSystem``) to the property paths
        wanted. Returns a list of :class:`ObjectProps`. Requests: CreateContainerView,
        RetrievePropertiesEx (+ Continue per extra page), DestroyView.
        """
        view = self.content.viewManager.CreateContainerView(
            root or self.content.rootFolder, list(specs), True)
        try:
            pc = vmodl.query.PropertyCollector
            traversal = pc.TraversalSpec(name="view", path="view", skip=False,
                                         type=vim.view.ContainerView)
            obj_spec = pc.ObjectSpec(obj=view, skip=True, selectSet=[traversal])
            return self._collect(obj_spec_list=[obj_spec], specs=specs)
        finally:
            try:
                view.DestroyView()
            except vmodl.MethodFault:
                pass

    def retrieve_objects(self, objs, properties):
        """Properties of a known list of objects of one type, in one retrieval."""
        objs = list(objs)
        if not objs:
            return []
        pc = vmodl.query.PropertyCollector
        obj_specs = [pc.ObjectSpec(obj=o, skip=False) for o in objs]
        return self._collect(obj_spec_list=obj_specs, specs={type(objs[0]): properties})

    def _collect(self, obj_spec_list, specs):
        pc = vmodl.query.PropertyCollector
        prop_specs = [pc.PropertySpec(type=t, pathSet=list(paths), all=False) for t, paths in specs.items()]
        filter_spec = pc.FilterSpec(objectSet=obj_spec_list, propSet=prop_specs)
        collector = self.content.propertyCollector
        try:
            result = collector.RetrievePropertiesEx(specSet=[filter_spec], options=pc.RetrieveOptions())
            out = []
            while result is not None:
                for item in result.objects or []:
                    out.append(ObjectProps(item.obj, dict((p.name, p.val) for p in item.propSet or [])))
                if not result.token:
                    break
                result = collector.ContinueRetrievePropertiesEx(token=result.token)
            return out
        except vmodl.MethodFault as exc:
            raise VsphereError("property retrieval failed: %s" % fault_message(exc))

    # -- tasks ---------------------------------------------------------------------------
    def wait_for_task(self, task, timeout=600, what="task", initial_delay=0.1, max_delay=5.0,
                      sleep=time.sleep, clock=time.monotonic):
        """Wait for a task to end; return its result or raise :class:`VsphereTaskError`."""
        deadline = clock() + timeout
        delay = initial_delay
        while True:
            try:
                info = task.info
            except vmodl.MethodFault as exc:
                raise VsphereTaskError("%s: cannot read task state: %s" % (what, fault_message(exc)))
            if info.state == "success":
                return info.result
            if info.state == "error":
                raise VsphereTaskError("%s failed: %s" % (what, fault_message(info.error)))
            if clock() >= deadline:
                raise VsphereTaskError("%s did not finish within %ss (state %s)" % (what, timeout, info.state))
            sleep(delay)
            delay = min(delay * 2, max_delay)

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
