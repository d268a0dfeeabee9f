#!/usr/bin/env bash
# Idempotent set-up behind `make repro` and `make test`:
#   1. the Debian packages every study needs (installed when missing and we are root;
#      otherwise one message with the exact command to run),
#   2. .venv with this project installed from pyproject.toml (re-installed when it changes),
#   3. DVC, initialised in the repo (committed: .dvc/ is part of the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(postgresql-15 postgresql-contrib postgresql-15-pglogical slony1-2-bin postgresql-15-slony1-2
          postgresql-15-pgq3 pgqd python3-londiste postgresql-15-londiste-sql sysbench openssh-server)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "pglab: installing Debian packages: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  else
    echo "pglab: missing Debian packages: ${missing[*]}" >&2
    echo "run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

PY=${PYTHON:-python3}
stamp=$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.pglab-stamp 2>/dev/null)" != "$stamp" ]; then
  echo "pglab: creating .venv and installing the project (pyproject.toml)"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  echo "$stamp" > .venv/.pglab-stamp
fi

if [ ! -d .dvc ]; then
  .venv/bin/dvc init -q
fi
# no network beyond package registries: keep DVC from phoning home
.venv/bin/dvc config core.analytics false >/dev/null
.venv/bin/dvc config core.check_update false >/dev/null 2>&1 || true
