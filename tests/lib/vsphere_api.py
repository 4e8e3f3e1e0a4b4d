"""The vSphere simulator's Automation API through the collection's own REST client, for integration tests
that make or read objects around a module run: ``logged_in(sim)`` (a session closed on leaving),
``read_or_none(sim, path)`` (an object, or None where there is none), and ``h100_supervisor(hosts)``, the
fleet cluster gpu-h100 with the Supervisor enabled."""
import contextlib

from tests.lib.helpers import rest

DRIVER = "550.90.05-1OEM.800.1.0.20613240"


@contextlib.contextmanager
def logged_in(sim):
    client = rest(sim)
    try:
        yield client
    finally:
        client.close()


def read_or_none(sim, path):
    """The object at ``path``, or None where vCenter answers not found."""
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound  # pylint: disable=import-outside-toplevel
    with logged_in(sim) as client:
        try:
            return client.get(path)
        except VsphereNotFound:
            return None


def h100_supervisor(hosts=1):
    """A fleet cluster gpu-h100 of ``hosts`` hosts with two H100s each, the Supervisor enabled on it."""
    return {"name": "gpu-h100", "supervisor": True,
            "hosts": [{"prefix": "esx-h100-", "count": hosts, "gpu": {"model": "H100-80GB", "count": 2},
                       "driver_version": DRIVER}]}
