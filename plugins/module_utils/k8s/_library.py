# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the Kubernetes Python library imports, asked once for every module (client layer: knows nothing
of Ansible). Modules reach the library only through the k8s room; they ask here before they read or write."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

try:
    import kubernetes  # noqa: F401  pylint: disable=unused-import
    K8S_IMPORT_ERROR = None
except ImportError:
    K8S_IMPORT_ERROR = traceback.format_exc()

HAS_KUBERNETES = K8S_IMPORT_ERROR is None
