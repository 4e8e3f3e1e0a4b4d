# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The failure of a task as one safe line, for the rescue blocks of the playbooks.

Documented in failure_message.yml next to this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# result keys that say what a failed run left behind (vSphere modules' failure results)
LEFT_KEYS = (
    ("hosts_in_maintenance", "hosts left in maintenance mode"),
    ("vms_powered_off", "VMs left powered off"),
    ("staged_not_running", "driver staged, not running"),
)


def failure_message(result, task=None):
    """The message of a failed task's result, never the whole result.

    ``result``: ``ansible_failed_result`` (None or undefined-as-default when the task left
    none); ``task``: ``ansible_failed_task``. A task with ``no_log`` (or a censored result)
    gives a fixed text: its result can hold credentials or licensing data.
    """
    task = task if isinstance(task, dict) else {}
    name = task.get("name")
    what = "task '%s'" % name if name else "a task"
    if not isinstance(result, dict):
        return "%s failed and left no result" % what
    if task.get("no_log") in (True, "true", "True", "yes") or "censored" in result:
        return "%s failed; its output is hidden (no_log) because it handles credentials or licensing data" % what
    items = [r for r in result.get("results") or [] if isinstance(r, dict) and r.get("failed")]
    if items:  # a loop: "One or more items failed" says nothing; each failed item's own message does
        return "; ".join(failure_message(r, task) for r in items)
    msg = result.get("msg") or "%s failed without a message" % what
    left = []
    for key, text in LEFT_KEYS:
        value = result.get(key)
        if value:
            left.append("%s: %s" % (text, ", ".join(str(v) for v in value) if isinstance(value, list) else value))
    if left:
        msg = "%s (%s)" % (msg, "; ".join(left))
    return str(msg)


class FilterModule(object):
    def filters(self):
        return {"failure_message": failure_message}
