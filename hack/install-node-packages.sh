#!/usr/bin/env bash
# Installs what the real nodes and the image builds take from Debian, only
# when something is missing; a second run does nothing.
#
#   containerd                  the container runtime (containerd 1.6 from Debian: the kubelet accepts it)
#   crun                        the OCI runtime containerd runs (in C: an exec probe costs a fraction of runc's)
#   runc                        the OCI runtime of the image builds (buildah)
#   containernetworking-plugins bridge, host-local and loopback CNI plugins
#   iptables, conntrack         kube-proxy's Service rules
#   ipset                       kube-router's NetworkPolicy rules (hack/node_policies.py)
#   xfsprogs                    the real node's XFS volumes (hack/local_volumes.py)
#   buildah, debootstrap        images built here from Debian's packages (hack/images.sh)
#   ShellCheck (shellcheck)     make lint's check of every shell script
set -euo pipefail
declare -A NEEDS=(
  [containerd]=containerd [crun]=crun [runc]=runc [ctr]=containerd [iptables]=iptables [conntrack]=conntrack [ipset]=ipset
  [buildah]=buildah [debootstrap]=debootstrap [curl]=curl [mkfs.xfs]=xfsprogs [xfs_growfs]=xfsprogs [losetup]=mount
  [shellcheck]=shellcheck
)
missing=()
for command in "${!NEEDS[@]}"; do
  command -v "${command}" >/dev/null || missing+=("${NEEDS[${command}]}")
done
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
if ((${#missing[@]} == 0)); then
  echo "node packages: present"
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null || { echo "node packages: missing ${missing[*]}, and not root (no sudo)" >&2; exit 1; }
  SUDO=(sudo)
fi
echo "node packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
echo "node packages: installed"
