#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks use, if any is missing.
# Needs root (or sudo). Used by .ci/run and by `npm test` on a fresh machine.
set -euo pipefail

# command -> Debian package
declare -A need=(
  [openssl]=openssl
  [redis-server]=redis-server
  [etcd]=etcd-server
  [chromium]=chromium
  [mvn]=maven
  # better-sqlite3 (a dev dependency of packages/fence) compiles its addon when no prebuilt one fits
  [make]=make
  [g++]=g++
  [python3]=python3
  # promtool checks deploy/prometheus/alerts.yml (test/deploy/monitoring.test.ts)
  [promtool]=prometheus
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
[ -x /usr/lib/postgresql/15/bin/postgres ] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
# The Python client's tests run in a virtual environment (scripts/python-tests.sh): Debian splits venv/ensurepip off.
# (Only Debian's own python3 lacks it; another python3 first on PATH, e.g. pyenv's, brings its own.)
if [ "$(command -v python3 || true)" = /usr/bin/python3 ] || ! command -v python3 >/dev/null 2>&1; then
  dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'install ok installed' || missing+=(python3-venv)
fi
# Clock-skew tests run server processes under libfaketime.
ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || missing+=(libfaketime)
# Browser tests: a font, so their screenshots are readable.
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing test dependencies: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "cannot install ${missing[*]}: run as root or install them with apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
