"""Stand-in for the pip bootstrap script that ansible-test downloads before a sanity test.

ansible-test creates an empty virtual environment per sanity test and runs a "get-pip"
script in it, which it fetches from its own file host on first use. Where that host cannot
be reached, `make sanity` puts this script in ansible-test's cache under the expected name.
It does what the original does for ansible-test: give the running interpreter pip (from
the standard library's ensurepip wheel), then install the requested packages with it.
"""
import ensurepip
import os
import ssl
import subprocess
import sys

# options only the original bootstrap script understands
SCRIPT_ONLY = {"--no-setuptools", "--no-wheel"}


def main(argv):
    ensurepip.bootstrap(upgrade=True)
    args = [a for a in argv if a not in SCRIPT_ONLY]
    # ensurepip's pip trusts only its own certifi bundle, and ansible-test passes no PIP_CERT:
    # verify the package index against the system trust store, as newer pip does by default
    paths = ssl.get_default_verify_paths()
    cafile = os.environ.get("PIP_CERT") or paths.cafile or paths.openssl_cafile
    if cafile and os.path.exists(cafile):
        args = ["--cert", cafile] + args
    if args:
        subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main(sys.argv[1:])
