#!/usr/bin/env bash
# The unit tests and ansible-test sanity on the ansible-core of one matrix venv (`make matrix`): the two
# side by side (the unit tests in one process, sanity on the other core), then each result, the
# versions and the wall time. The tests run ansible-playbook and ansible-builder from that venv
# (tests/lib/ansible_run.py takes them from the running interpreter's folder).
# Usage: tests/tools/matrix.sh <venv>
set -uo pipefail
venv=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
core=$("$venv/bin/python" -c 'from ansible.release import __version__; print(__version__)') || exit 1
echo "matrix: ansible-core $core ($venv)"
start=$(date +%s)
sanity_log=$(mktemp)
trap 'rm -f "$sanity_log"' EXIT
{ "$venv/bin/python" tests/tools/seed_ansible_test_cache.py \
    && tests/tools/sanity.sh "$venv/bin/ansible-test"; } >"$sanity_log" 2>&1 &
sanity=$!
PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q tests/unit
unit_rc=$?
unit_s=$(($(date +%s) - start))
wait $sanity
sanity_rc=$?
cat "$sanity_log"
echo "matrix: ansible-core $core: unit tests rc=$unit_rc ($unit_s s), sanity rc=$sanity_rc," \
  "$(($(date +%s) - start)) s"
[ $unit_rc -eq 0 ] && [ $sanity_rc -eq 0 ]
