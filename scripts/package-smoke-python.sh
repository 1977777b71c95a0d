#!/usr/bin/env bash
# Builds the Python client with `python -m build` (sdist and wheel), installs
# each artefact into a fresh virtual environment outside the repository with
# every interpreter in PYTHONS, and runs a smoke test against a real server
# started from this checkout (bin/ticketing must be built). PYTHONS defaults to
# the oldest and newest Python the package claims (3.10 and 3.13), found
# through pyenv or on PATH; a missing one is an error, not a skip.
#
#   PYTHONS="/usr/bin/python3.10 /usr/bin/python3.13"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

find_python() { # 3.10 -> an interpreter of that version
  local v="$1" p
  for p in "$(command -v "python$v" 2>/dev/null || true)" "$HOME"/.pyenv/versions/"$v".*/bin/python; do
    if [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import sys' 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no Python $v found (set PYTHONS)" >&2
  return 1
}
if [ -z "${PYTHONS:-}" ]; then PYTHONS="$(find_python 3.10) $(find_python 3.13)"; fi

builder="${PYTHON:-python3}"
"$builder" -m venv "$work/build-venv"
"$work/build-venv/bin/pip" install -q --disable-pip-version-check build
"$work/build-venv/bin/python" -m build -q --outdir "$work/dist" "$root/clients/python" >/dev/null
ls "$work/dist"

port="$("$builder" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$root/bin/ticketing" server --memory --listen "127.0.0.1:$port" --http off >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q ready "$work/server.log" && break; sleep 0.1; done
export TICKETING_ADDR="127.0.0.1:$port"

cd "$work"
for py in $PYTHONS; do
  for artefact in "$work"/dist/*.whl "$work"/dist/*.tar.gz; do
    venv="$work/venv-$(basename "$artefact")-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$artefact"
    echo "$(basename "$artefact") on $("$py" --version):"
    "$venv/bin/python" "$root/scripts/smoke/python_smoke.py"
  done
done
echo "package smoke test (Python client): ok"
