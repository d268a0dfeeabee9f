#!/usr/bin/env bash
# `dvc pull`, never silent when it fails: the shipped outputs it could not restore are named, with the way out.
# (`dvc pull --quiet` exits 1 and prints nothing when a command wrote over a shipped output, e.g. reports/history.html.)
set -uo pipefail
out=$(dvc pull --quiet 2>&1) && exit 0
echo "make: 'dvc pull' could not restore the shipped outputs (the data/dvc-remote folder in this repository):" >&2
err=$(dvc pull 2>&1 | grep -v '^$' | tail -n 20)
echo "${out:-$err}" | sed 's/^/  /' >&2
if echo "$err" | grep -q "unsaved files"; then
  echo "A file above was changed since it was checked out. To put back the shipped copy (yours is lost):" >&2
  echo "  dvc checkout --force <file>     (or keep yours first: cp <file> yours/)" >&2
fi
exit 1
