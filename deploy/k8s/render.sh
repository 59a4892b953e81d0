#!/usr/bin/env bash
# Prints the manifests of deploy/k8s/ with an image and a node count filled
# in, ready for `kubectl apply -f -`:
#
#   deploy/k8s/render.sh IMAGE NODES [statefulset|daemonset]
#
# IMAGE replaces rackbench:latest in every container; NODES is the number of
# node managers of the StatefulSet (the DaemonSet runs one per Kubernetes
# node, so NODES must be 0 with it). The test sequencer's manifest comes
# first. crates/rackbench/tests/k8s_pods.rs renders them this way and runs
# the commands their pods run, each pod in its own network, mount and UTS
# namespaces.
set -euo pipefail
usage() { echo "usage: $0 IMAGE NODES [statefulset|daemonset]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
image="$1"
nodes="$2"
kind="${3:-statefulset}"
here="$(cd "$(dirname "$0")" && pwd)"
if ! [[ "$image" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]]; then
  echo "$0: '$image' is not an image reference" >&2; exit 2
fi
if ! [[ "$nodes" =~ ^[0-9]+$ ]]; then
  echo "$0: NODES must be a non-negative integer, got '$nodes'" >&2; exit 2
fi
case "$kind" in
  statefulset)
    if [ "$nodes" -lt 1 ]; then echo "$0: a StatefulSet needs NODES >= 1" >&2; exit 2; fi
    managers="$here/node-managers.yaml" ;;
  daemonset)
    if [ "$nodes" -ne 0 ]; then echo "$0: a DaemonSet runs one node manager per node; give NODES 0" >&2; exit 2; fi
    managers="$here/node-managers-daemonset.yaml" ;;
  *) usage ;;
esac
for f in "$here/sequencer.yaml" "$managers"; do
  grep -q '^\s*image: rackbench:latest$' "$f" || { echo "$0: $f has no 'image: rackbench:latest'" >&2; exit 1; }
done
sed -e "s|^\(\s*image:\) rackbench:latest\$|\1 $image|" "$here/sequencer.yaml"
echo "---"
if [ "$kind" = statefulset ]; then
  grep -q '^  replicas: [0-9]*$' "$managers" || { echo "$0: $managers has no top-level 'replicas:'" >&2; exit 1; }
  sed -e "s|^\(\s*image:\) rackbench:latest\$|\1 $image|" \
      -e "s|^  replicas: [0-9]*\$|  replicas: $nodes|" "$managers"
else
  sed -e "s|^\(\s*image:\) rackbench:latest\$|\1 $image|" "$managers"
fi
