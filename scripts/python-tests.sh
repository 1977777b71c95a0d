#!/usr/bin/env bash
# The Python client (clients/python): a virtual environment with pytest, mypy
# and psycopg from PyPI, the package installed from clients/python (as a user
# would: `pip install clients/python`), `mypy --strict`, then its tests (unit,
# conformance, fencing against a real PostgreSQL and SQLite, black-box against
# bin/ticketing, which must be built first). Keep it under two minutes.
#
#   PY_VENV   where the venv lives (default clients/python/.venv; reused when present)
#   extra arguments go to pytest, e.g. scripts/python-tests.sh -k fence
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${PY_VENV:-$root/clients/python/.venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q --disable-pip-version-check "pytest>=7" "mypy>=1.5" "psycopg[binary]>=3.1"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$root/clients/python"

cd "$root/clients/python"
echo "mypy --strict (the package)"
"$venv/bin/python" -m mypy --strict src/ticketing_client
echo "pytest"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
