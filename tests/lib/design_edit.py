"""The example design for tests that edit it: a fresh copy, and its pools, clusters and tenants by name."""
import copy
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def example():
    """A copy of examples/design.yml to edit."""
    return copy.deepcopy(EXAMPLE)


def pool(d, name):
    return [p for p in d["pools"] if p["name"] == name][0]


def cluster(d, name):
    return [c for c in d["clusters"] if c["name"] == name][0]


def tenant(d, name):
    return [t for t in d["tenants"] if t["name"] == name][0]
