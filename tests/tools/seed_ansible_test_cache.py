"""Put ansible_test_get_pip.py where ansible-test looks for its cached pip bootstrap script,
for the pip version this ansible-test pins, unless a bootstrap script is already cached."""
import inspect
import os
import pathlib
import re
import shutil

from ansible_test._internal import python_requirements


def pinned_pip_versions():
    # the pip versions ansible-test installs in its sanity venvs are literals in this function
    source = inspect.getsource(python_requirements.get_venv_packages)
    return sorted(set(re.findall(r"pip\s*=\s*'([0-9.]+)'", source)))


def main():
    here = pathlib.Path(__file__).resolve().parent
    versions = pinned_pip_versions()
    if not versions:
        raise SystemExit("cannot find the pip version ansible-test pins; update %s" % __file__)
    for version in versions:
        target = pathlib.Path(os.path.expanduser("~/.ansible/test/cache/get_pip_%s.py" % version.replace(".", "_")))
        ours = (here / "ansible_test_get_pip.py").read_bytes()
        if target.exists() and (target.read_bytes() == ours or b"ensurepip" not in target.read_bytes()):
            continue  # up to date, or a real bootstrap script downloaded by ansible-test
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(here / "ansible_test_get_pip.py", target)
        print("seeded ansible-test's pip %s bootstrap script" % version)


if __name__ == "__main__":
    main()
