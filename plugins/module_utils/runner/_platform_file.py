# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A file written from what the platform says: the part gpu_pool_discover (a design file) and
gpu_pool_capture (a capture file) share.

Both read the vSphere link through the pool readers, then each Kubernetes link they are given a
kubeconfig for; a Kubernetes link that cannot be read is named (``links_not_read``) instead of
failing the run, while a bug in the reading still fails it. Both refuse an existing file without
``force`` before anything is read, plan one change (the file's content) and write it at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LINK_FAILURES, LinkError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError, request_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _discover
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, UPDATE, Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._files import SECRET_MODE, atomic_write, replaced_text
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._pool_reader import read_esxi, read_platform


def platform_file_argument_spec(**options):
    """The options both modules take (the file, the Kubernetes links, the request timeout) and ``options``."""
    return dict(
        dest=dict(type="path", required=True),
        force=dict(type="bool", default=False),
        clusters=dict(type="list", elements="str"),
        supervisor_kubeconfig=dict(type="path"),
        supervisor_context=dict(type="str"),
        kubeconfig=dict(type="path"),
        context=dict(type="str"),
        **dict(request_argument_spec(), **options)
    )


class PlatformFile(Resource):
    """One file whose content is made from the platform read: ``what`` names it ("design file"); a
    subclass gives :meth:`content` (the read made into the file's text and the module's result) and
    may hide the content from the plan (:attr:`shown`, False for a file of secret mode)."""

    verb = "write"
    refusals = (_discover.DiscoverError,)
    errors = (IOError, OSError, LinkError)
    what = "file"
    mode = None
    shown = True

    def __init__(self, module):
        self.module = module
        self.path = os.path.abspath(module.params["dest"])
        self.text = None
        Resource.__init__(self, "%s %s" % (self.what, module.params["dest"]))

    def read(self):
        p = self.module.params
        # an existing file without force is refused before anything is read
        before = replaced_text(self.path, p["force"], "%s %s" % (self.what, self.path))
        with self.doing("read", "the GPU hosts"):
            hosts, drs = read_esxi(self.module.client(), rest=self.module.open_rest_session)
        with self.doing("read", "the VM classes and namespaces"):
            platform = read_platform(self.module)
        if (p["supervisor_kubeconfig"] or p["kubeconfig"]) and K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes") + " Nothing was written.", exception=K8S_IMPORT_ERROR)
        live = self.content(hosts, drs, platform)
        live["before"], self.text = before, live["text"]
        return live

    def content(self, hosts, drs, platform):
        """A dict with at least ``text`` (the file's new content) and ``unread`` (link: why)."""
        raise NotImplementedError

    @staticmethod
    def read_link(link, unread, read, *args):
        """``read(*args)`` of one Kubernetes link; its answer, or None with the reason in ``unread[link]``
        when the link cannot be read (its client's errors, kubeconfig, API and socket errors; a bug goes on)."""
        try:
            return read(*args)
        except (LinkError, K8sError) as exc:
            unread[link] = to_native(exc)
        except LINK_FAILURES as exc:
            unread[link] = "%s: %s" % (type(exc).__name__, to_native(exc))
        return None

    def plan(self, live):
        if live["before"] == live["text"]:
            return Plan()
        before, after = (live["before"], live["text"]) if self.shown else (None, "%d bytes" % len(live["text"]))
        return Plan([Change("%s %s" % (self.what, self.path), "content", before, after,
                            CREATE if live["before"] is None else UPDATE)])

    def apply(self, plan):
        # a secret's file is moved with os.replace (its mode set before a byte is written), a report's with the
        # module's atomic_move (an existing file's owner and SELinux context kept)
        atomic_write(self.path, self.text, self.mode, move=None if self.mode == SECRET_MODE else self.module.atomic_move)
