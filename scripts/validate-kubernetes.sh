#!/usr/bin/env bash
# Validates deploy/kubernetes/*.yaml against the Kubernetes API schemas
# (strict: unknown fields are errors) with kubernetes-validate from PyPI,
# which carries the schemas itself (no network at validation time).
#   scripts/validate-kubernetes.sh [KUBERNETES_VERSION]     (default 1.30.0)
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-1.30.0}"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/ticketing/kubernetes-validate"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet kubernetes-validate==1.37.0
fi
files=(deploy/kubernetes/configmap.yaml deploy/kubernetes/services.yaml deploy/kubernetes/statefulset.yaml deploy/kubernetes/poddisruptionbudget.yaml)
"$venv/bin/kubernetes-validate" --strict --kubernetes-version "$version" "${files[@]}"
echo "kubernetes manifests: ${#files[@]} files valid for Kubernetes $version"
