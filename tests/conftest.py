"""Import paths for every test: the collection as ``ansible_collections.gpupool.vcf`` (through
the ``.build/collections`` symlink tree the Makefile also uses), the repository root (for
``tests.lib``), ``tests/sim`` (the simulator launchers) and ``tests/sim/dls`` (the DLS double)."""
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROOT = os.path.join(_REPO, ".build", "collections")
_LINK = os.path.join(_ROOT, "ansible_collections", "gpupool", "vcf")
if not os.path.lexists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(_REPO, _LINK)
for _path in (_ROOT, _REPO, os.path.join(_REPO, "tests", "sim"), os.path.join(_REPO, "tests", "sim", "dls")):
    if _path not in sys.path:
        sys.path.insert(0, _path)
