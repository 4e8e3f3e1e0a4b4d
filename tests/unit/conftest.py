"""Make ``ansible_collections.gpupool.vcf`` importable in unit tests without ansible-test."""
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ROOT = os.path.join(_REPO, ".build", "collections")
_LINK = os.path.join(_ROOT, "ansible_collections", "gpupool", "vcf")
if not os.path.lexists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(_REPO, _LINK)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
