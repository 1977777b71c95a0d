#!/usr/bin/env bash
# The Python client (clients/python): the package installed from clients/python
# into the test venv (as a user would: `pip install clients/python`), `mypy
# --strict`, then its tests (unit, conformance, fencing against a real
# PostgreSQL and SQLite, black-box against bin/ticketing, which must be built
# first: they fail without it). The venv and its pinned tools come from
# `npm run setup`. Keep it under two minutes.
#
#   PY_VENV       the venv (default clients/python/.venv, made by npm run setup)
#   PY_JUNIT_XML  also write pytest's results there (npm test counts them)
#   extra arguments go to pytest, e.g. scripts/python-tests.sh -k fence
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${PY_VENV:-$root/clients/python/.venv}"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import pytest, mypy, psycopg' 2>/dev/null; then
  echo "no Python test venv with pytest, mypy and psycopg at $venv: run npm run setup" >&2
  exit 1
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$root/clients/python"

cd "$root/clients/python"
echo "mypy --strict (the package)"
"$venv/bin/python" -m mypy --strict src/ticketing_client
echo "pytest"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -rs ${PY_JUNIT_XML:+--junitxml="$PY_JUNIT_XML"} "$@"
