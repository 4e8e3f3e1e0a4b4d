# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The client configuration token as dls_client_token keeps it on the controller: the token file and,
next to it, ``<token>.meta.json`` (expiry, sha256 of the token's stripped content). Read by the audit's
licensing link and by nls_appliance_info; knows nothing of Ansible."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json


def read_token(path):
    """(metadata or None, sha256 of the token's stripped content or None); a missing or unreadable
    token is (None, None), a token without readable metadata (None, digest)."""
    try:
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read().strip()).hexdigest()
    except OSError:
        return None, None
    try:
        with open(path + ".meta.json") as fh:
            return json.load(fh), digest
    except (OSError, ValueError):
        return None, digest
