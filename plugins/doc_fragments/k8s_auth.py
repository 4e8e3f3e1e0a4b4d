# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The names, meanings and environment variables are those of kubernetes.core's
    # k8s_auth_options, so one module_defaults block serves both collections.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file. If no connection option is given, E(K8S_AUTH_KUBECONFIG),
        then E(KUBECONFIG), then C(~/.kube/config) is used.
    type: path
  context:
    description:
      - Context of the kubeconfig file. If not set, E(K8S_AUTH_CONTEXT), then the file's current context.
    type: str
  host:
    description:
      - URL of the API server. If not set, E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API server. If not set, E(K8S_AUTH_API_KEY).
    type: str
  ca_cert:
    description:
      - PEM file of the CA that signed the API server certificate. If not set, E(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Client certificate (PEM). If not set, E(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Key of O(client_cert). If not set, E(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
  validate_certs:
    description:
      - Verify the API server certificate. If not set, E(K8S_AUTH_VERIFY_SSL), then true.
    type: bool
    aliases: [verify_ssl]
requirements:
  - kubernetes >= 24.2.0
notes:
  - The connection options have the names and environment variables of C(kubernetes.core), so
    C(module_defaults) for C(group/gpupool.vcf.k8s) and for C(group/kubernetes.core.k8s) can share them.
"""
