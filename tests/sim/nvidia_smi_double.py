#!/usr/bin/env python3
"""The rig's ``nvidia-smi`` (see tests/sim/k8s/README.md, "nvidia-smi in the driver pod"): what an exec of
``nvidia-smi -q`` into a GPU Operator driver pod prints of the driver and of each GPU's vGPU software license.

kwok runs an exec into a pod as a local command; the rig puts this program first on kwok's PATH as
``nvidia-smi`` and a test gives each driver pod an Exec (kwok.x-k8s.io/v1alpha1) whose environment names a
state file, ``GPUPOOL_SIM_NVIDIA_SMI_STATE``, a JSON object the test writes and rewrites:

    {"driver_version": "550.127.05", "timestamp": "Sun Dec  6 21:00:00 2026",
     "gpus": [{"pci_bus_id": "00000000:02:00.0", "product_name": "GRID A100-4C",
               "licensed_product": "NVIDIA Virtual Compute Server",
               "license_status": "Licensed (Expiry: 2027-11-29 23:59:59 GMT)"}]}
    {"driver": false}          # the driver is not loaded (nvidia-smi fails)

Only ``-q`` (and ``--query``) is answered; any other argument is refused as nvidia-smi refuses an unknown
option. The state is read at each run: a rewrite is what the next exec sees.
"""
import json
import os
import sys

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
             "the latest NVIDIA driver is installed and running.")
W = 42  # the width nvidia-smi -q pads its keys to (counting the indent)


def line(indent, key, value):
    text = "    " * indent + key
    return "%s: %s" % (text.ljust(W), value)


def render(state):
    gpus = state.get("gpus") or []
    out = ["", "==============NVSMI LOG==============", "",
           line(0, "Timestamp", state.get("timestamp", "Sun Dec  6 21:00:00 2026")),
           line(0, "Driver Version", state.get("driver_version", "550.127.05")),
           line(0, "CUDA Version", state.get("cuda_version", "12.4")), "",
           line(0, "Attached GPUs", len(gpus))]
    for g in gpus:
        out += ["GPU %s" % g["pci_bus_id"],
                line(1, "Product Name", g.get("product_name", "GRID A100-4C")),
                line(1, "Product Brand", "NVIDIA Virtual Compute Server"),
                line(1, "Display Mode", "Disabled"),
                line(1, "Persistence Mode", "Enabled"),
                "    vGPU Software Licensed Product",
                line(2, "Product Name", g.get("licensed_product", "NVIDIA Virtual Compute Server")),
                line(2, "License Status", g.get("license_status", "Unlicensed (Restricted)")),
                line(1, "Minor Number", g.get("minor", 0))]
    return "\n".join(out) + "\n"


def main(argv):
    if argv not in (["-q"], ["--query"]):
        sys.stderr.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
        return 2
    path = os.environ.get("GPUPOOL_SIM_NVIDIA_SMI_STATE")
    if not path:
        sys.stderr.write("the rig's nvidia-smi: no GPUPOOL_SIM_NVIDIA_SMI_STATE in the exec's environment\n")
        return 2
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError):
        sys.stdout.write(NO_DRIVER + "\n")
        return 9
    if state.get("driver") is False:
        sys.stdout.write(NO_DRIVER + "\n")
        return 9
    sys.stdout.write(render(state))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
