# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one base of every client error (pure: no I/O).

Each client room raises its own error type (``VsphereError``, ``K8sError``, ``DlsError``,
``PromError``, ``LinkError``, ``ShellError`` and their subclasses); all of them derive from
:class:`ClientError`, so the runner catches this one type and imports no client. A module may
still catch a narrower type where it handles one backend's failure itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ClientError(Exception):
    """A call to a server failed; the message is meant for the user.

    ``msg``: the message; ``partial``: what was done before the failure (a dict that the runner
    returns with the failure); ``next_step``: what the user can do about it (the runner appends
    it to the message when the resource names none); ``outcome_unknown``: a change was sent and
    whether it was carried out is not known (the runner reads the object again).
    """

    outcome_unknown = False
    partial = None
    next_step = None

    def __init__(self, msg="", partial=None, next_step=None):
        super(ClientError, self).__init__(msg)
        self.msg = msg
        if partial is not None:
            self.partial = dict(partial)
        if next_step is not None:
            self.next_step = next_step


__all__ = ["ClientError"]
