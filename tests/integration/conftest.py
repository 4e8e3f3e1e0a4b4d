"""Fixtures shared by the integration tests: one vSphere simulator per test module.

A test module sets ``FLEET`` (a fleet dict, see tests/sim/vsphere/README.md); the
``vsphere`` fixture starts the simulator on it and stops it after the module. A module that sets
``VSPHERE_SSH = True`` gets the GPU hosts' SSH too (tests/lib/chain.py vsphere_with_ssh: a key pair of
its own; ``chain.ssh_vars(vsphere)`` or ``chain.platform(..., ssh=vsphere)`` give site.yml its variables).
"""
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vsphere(request, tmp_path_factory):
    import vsphere_sim

    fleet = getattr(request.module, "FLEET", None)
    if fleet is None:
        fleet = ROOT / "examples" / "fleet.yml"
    if getattr(request.module, "VSPHERE_SSH", False):
        from tests.lib import chain
        sim = chain.vsphere_with_ssh(fleet, tmp_path_factory.mktemp("ssh"))
    else:
        sim = vsphere_sim.start(fleet)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def vsphere_env(vsphere):
    """Environment that points the collection's modules at the simulator."""
    return dict(vsphere.env)


@pytest.fixture
def dls():
    """A fresh DLS appliance double per test (tests/sim/dls), stopped after it."""
    import dls_double

    double = dls_double.start()
    try:
        yield double
    finally:
        double.stop()
