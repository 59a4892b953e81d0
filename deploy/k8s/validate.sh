#!/usr/bin/env bash
# Validates deploy/k8s/*.yaml against the Kubernetes API schemas (strict:
# unknown fields are errors), with kubernetes-validate from PyPI, which
# ships the schemas (no network access beyond the package registry).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${KUBE_VALIDATE_VENV:-${TMPDIR:-/tmp}/rackbench-kubernetes-validate}"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "kubernetes-validate==1.37.0"
fi
"$venv/bin/kubernetes-validate" --strict "$here"/*.yaml
