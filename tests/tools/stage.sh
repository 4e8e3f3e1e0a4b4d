#!/usr/bin/env bash
# One stage of `make test`: runs the command, prints the stage's wall time in seconds and adds
# "<stage> <seconds> <rc>" to the run's log; `--summary` prints every stage of the log and the total.
# A failed stage prints the summary of the stages so far before make stops.
# Usage: tests/tools/stage.sh <log> <stage> <command> [arguments]
#        tests/tools/stage.sh <log> --summary
set -uo pipefail
log=$1
shift

summary() {
  echo "make test: seconds per stage"
  awk '{ printf "  %-14s %6d s%s\n", $1, $2, ($3 == 0 ? "" : "  (failed, rc=" $3 ")"); total += $2 }
       END { printf "  %-14s %6d s\n", "total", total }' "$log"
}

if [ "$1" = --summary ]; then
  summary
  exit 0
fi
stage=$1
shift
mkdir -p "$(dirname "$log")"
start=$(date +%s)
"$@"
rc=$?
seconds=$(($(date +%s) - start))
echo "$stage $seconds $rc" >>"$log"
echo "stage $stage: rc=$rc, $seconds s"
if [ $rc -ne 0 ]; then
  summary
fi
exit $rc
