#!/usr/bin/env bash
# Build the Kubernetes test rig's binaries from pinned Go modules (go.mod here and in tools/*)
# into a per-user cache keyed by the module files, then link them into <bin-dir>.
# A second clone on the same machine finds the cache and only links.
# usage: build.sh <bin-dir> <share-dir>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin_dir=$(mkdir -p "$1" && cd "$1" && pwd)
share_dir=$(mkdir -p "$2" && cd "$2" && pwd)

k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")
minor=$(echo "$k8s_version" | cut -d. -f2)
key=$(cd "$here" && cat go.mod go.sum cmd/*/*.go tools/*/go.mod tools/*/go.sum build.sh | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpupool-vcf/k8s-$k8s_version-$key
mkdir -p "$cache/bin"
# one build at a time per cache (two clones or two make runs may start it together)
exec 9>"$cache/.lock"
flock 9

gobuild() { # <module dir> <out name> <package> [extra ldflags] [build tags]
    local dir=$1 out=$2 pkg=$3 extra=${4:-} tags=${5:-}
    [ -x "$cache/bin/$out" ] && return 0
    echo "k8s-build: $out ($pkg)"
    local t0=$SECONDS
    (cd "$dir" && go build -trimpath -tags="$tags" -ldflags="-s -w $extra" -o "$cache/bin/$out.tmp.$$" "$pkg")
    mv "$cache/bin/$out.tmp.$$" "$cache/bin/$out"
    echo "k8s-build: $out built in $((SECONDS - t0)) s"
}

# the version the API server reports (helm checks charts' kubeVersion against it)
vflags="-X k8s.io/component-base/version.gitVersion=$k8s_version"
vflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
vflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

gobuild "$here" etcd ./cmd/etcd
for c in kube-apiserver kube-controller-manager kube-scheduler; do
    gobuild "$here" "$c" "k8s.io/kubernetes/cmd/$c" "$vflags"
done
gobuild "$here/tools/kwok" kwok sigs.k8s.io/kwok/cmd/kwok
gobuild "$here/tools/helm" helm helm.sh/helm/v3/cmd/helm
gobuild "$here/tools/kueue" kueue sigs.k8s.io/kueue/cmd/kueue
# metrics (k8s_rig metrics=True): Prometheus without its service-discovery plugins (the rig
# scrapes static targets; remove_all_sd is upstream's build tag for that) and kube-state-metrics
prom_version=$(awk '$1 == "github.com/prometheus/prometheus" {print $2; exit}' "$here/tools/prometheus/go.mod")
pflags="-X github.com/prometheus/common/version.Version=$prom_version"
gobuild "$here/tools/prometheus" prometheus github.com/prometheus/prometheus/cmd/prometheus "$pflags" remove_all_sd
gobuild "$here/tools/prometheus" promtool github.com/prometheus/prometheus/cmd/promtool "$pflags" remove_all_sd
ksm_version=$(awk '$1 == "k8s.io/kube-state-metrics/v2" {print $2; exit}' "$here/tools/kube-state-metrics/go.mod")
gobuild "$here/tools/kube-state-metrics" kube-state-metrics k8s.io/kube-state-metrics/v2 \
    "-X github.com/prometheus/common/version.Version=$ksm_version"

# Kueue's CRDs as generated upstream from the same pinned module's Go types
if [ ! -d "$cache/kueue-crds" ]; then
    kueue_dir=$(cd "$here/tools/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
    mkdir -p "$cache/kueue-crds.tmp"
    cp "$kueue_dir"/config/components/crd/bases/*.yaml "$cache/kueue-crds.tmp/"
    chmod -R u+w "$cache/kueue-crds.tmp"
    mv "$cache/kueue-crds.tmp" "$cache/kueue-crds"
fi

for f in "$cache"/bin/*; do
    case $f in *.tmp*) continue ;; esac
    ln -sfn "$f" "$bin_dir/$(basename "$f")"
done
ln -sfn "$cache/kueue-crds" "$share_dir/kueue-crds"
echo "$k8s_version" > "$share_dir/version"
