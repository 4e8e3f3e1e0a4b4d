"""A callback for benchmarks: at the start of every play and at the end of the playbook it appends one JSON line
to the file $BENCH_MARKS_FILE: the play's name, the time (time.time()) and the vSphere simulator's request counts
then (GET $BENCH_SIM_URL/_sim/stats, verified with $VMWARE_CA_FILE). The benchmark takes the differences."""
import json
import os
import ssl
import time
import urllib.request

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: bench_marks
type: aggregate
short_description: marks each play's start with the vSphere simulator's request counts (benchmarks only)
description:
  - Appends one JSON line per play start and one at the end to the file named by E(BENCH_MARKS_FILE).
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_marks"
    CALLBACK_NEEDS_ENABLED = True

    def mark(self, name):
        path, url = os.environ.get("BENCH_MARKS_FILE"), os.environ.get("BENCH_SIM_URL")
        if not path or not url:
            return
        ctx = ssl.create_default_context(cafile=os.environ.get("VMWARE_CA_FILE"))
        with urllib.request.urlopen(url + "/_sim/stats", context=ctx, timeout=30) as res:
            stats = json.loads(res.read())
        with open(path, "a") as out:
            out.write(json.dumps({"play": name, "time": time.time(), "stats": stats}) + "\n")

    def v2_playbook_on_play_start(self, play):
        self.mark(play.get_name())

    def v2_playbook_on_stats(self, stats):
        self.mark(None)
