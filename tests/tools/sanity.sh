#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection at ansible_collections/gpupool/vcf.
# Each run gets its own tree (runs may overlap); ansible-test lists files through git, so the
# copy is its own git repository holding the tracked and new files of this checkout.
# Usage: tests/tools/sanity.sh <ansible-test> [ansible-test sanity arguments]
set -euo pipefail
ansible_test=$1; shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$repo/.build"
work=$(mktemp -d "$repo/.build/sanity.XXXXXX")
trap 'rm -rf "$work"' EXIT
coll="$work/ansible_collections/gpupool/vcf"
mkdir -p "$coll"
cd "$repo"
git ls-files -co --exclude-standard | grep -v -E '^tests/(sim|bench|lib|tools)/' | tar -T - -cf - | tar -xf - -C "$coll"
cd "$coll"
git init -q && git add -A
# the Python of the venv that holds this ansible-test
python=$("$(dirname "$ansible_test")/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$ansible_test" sanity --local --python "$python" --requirements "$@"
