# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One streaming completion of an OpenAI-compatible endpoint and what its first streamed chunk is (pure).

The one definition of "the first token" that pool_ready's first_token step and the latency probe
(playbooks/files/gpupool_latency_probe.py) share: the request body both send, and the test that
a line of the server-sent event stream is a streamed chunk. Standard library only and no import
of the collection, so the probe's ConfigMap carries this file as it is beside the probe.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def completion_request(url, model, prompt, max_tokens=16):
    """The JSON body of one streaming OpenAI-compatible completion (chat when the URL ends in chat/completions)."""
    body = {"stream": True, "max_tokens": max_tokens}
    if model:
        body["model"] = model
    if url.rstrip("/").endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return json.dumps(body).encode("utf-8")


def stream_chunk(line):
    """Whether one line of a server-sent event stream is a streamed chunk (``data: {...}``, not ``[DONE]``)."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text.startswith("data:"):
        return False
    data = text[len("data:"):].strip()
    if not data or data == "[DONE]":
        return False
    try:
        chunk = json.loads(data)
    except ValueError:
        return False
    return isinstance(chunk, dict) and bool(chunk.get("choices"))


__all__ = ["completion_request", "stream_chunk"]
