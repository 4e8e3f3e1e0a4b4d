# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The connection to a Prometheus HTTP API of the modules whose options carry the prometheus_
    # prefix. A module says in its own description of prometheus_url what it reads from there.
    # The bearer token has two names: BEARER_TOKEN (prometheus_bearer_token) and TOKEN
    # (prometheus_token, with the PROMETHEUS_TOKEN environment fallback).
    DOCUMENTATION = r"""
options:
  prometheus_url:
    description:
      - Base URL of the Prometheus HTTP API (V(https://prometheus.example.com:9090)).
    type: str
  prometheus_validate_certs:
    description: Verify Prometheus's TLS certificate.
    type: bool
    default: true
  prometheus_ca_path:
    description: CA bundle to verify Prometheus's certificate with.
    type: path
  prometheus_allow_plain_http:
    description:
      - Send the bearer token to a plain V(http://) O(prometheus_url) (unencrypted, so anyone on the path can read it).
      - Without it, a V(http://) URL with a token is refused before anything is sent; a redirect
        to another origin (scheme, host or port) never carries the token.
    type: bool
    default: false
"""

    BEARER_TOKEN = r"""
options:
  prometheus_bearer_token:
    description: Bearer token for Prometheus.
    type: str
"""

    TOKEN = r"""
options:
  prometheus_token:
    description: Bearer token for Prometheus (E(PROMETHEUS_TOKEN)).
    type: str
"""
