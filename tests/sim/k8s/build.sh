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

# every build: <module dir>|<binaries>|<packages>|<extra ldflags>|<build tags>; binaries of one module dir
# and flags build in one `go build`, which compiles their shared packages once and links them side by side
# the version the API server reports (helm checks charts' kubeVersion against it)
vflags="-X k8s.io/component-base/version.gitVersion=$k8s_version"
vflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
vflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
# metrics (k8s_rig metrics=True): Prometheus without its service-discovery plugins (the rig
# scrapes static targets; remove_all_sd is upstream's build tag for that) and kube-state-metrics
prom_version=$(awk '$1 == "github.com/prometheus/prometheus" {print $2; exit}' "$here/tools/prometheus/go.mod")
ksm_version=$(awk '$1 == "k8s.io/kube-state-metrics/v2" {print $2; exit}' "$here/tools/kube-state-metrics/go.mod")
builds=(
    "$here|etcd|./cmd/etcd||"
    "$here|kube-apiserver kube-controller-manager kube-scheduler|k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler|$vflags|"
    "$here/tools/kwok|kwok|sigs.k8s.io/kwok/cmd/kwok||"
    "$here/tools/helm|helm|helm.sh/helm/v3/cmd/helm||"
    "$here/tools/kueue|kueue|sigs.k8s.io/kueue/cmd/kueue||"
    "$here/tools/prometheus|prometheus promtool|github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool|-X github.com/prometheus/common/version.Version=$prom_version|remove_all_sd"
    "$here/tools/kube-state-metrics|kube-state-metrics|k8s.io/kube-state-metrics/v2|-X github.com/prometheus/common/version.Version=$ksm_version|"
)

missing() { # <binaries>: true when one of them is not in the cache yet
    local b
    for b in $1; do [ -x "$cache/bin/$b" ] || return 0; done
    return 1
}

# On a cold machine a build first downloads the modules of its packages, one module after another, with
# the CPU idle (about six minutes for all of them here). Listing every build's packages at once, in the
# background, fetches them side by side while the first builds compile; the Go module cache is safe for
# concurrent go commands.
prefetch_pids=()
for b in "${builds[@]}"; do
    IFS='|' read -r dir outs pkgs extra tags <<<"$b"
    missing "$outs" || continue
    # shellcheck disable=SC2086
    (cd "$dir" && go list -deps -tags="$tags" $pkgs >/dev/null 2>&1) & prefetch_pids+=($!)
done

for b in "${builds[@]}"; do
    IFS='|' read -r dir outs pkgs extra tags <<<"$b"
    missing "$outs" || continue
    echo "k8s-build: $outs"
    t0=$SECONDS
    tmp="$cache/bin/.tmp.$$"
    rm -rf "$tmp" && mkdir -p "$tmp"
    if [ "$(wc -w <<<"$outs")" -eq 1 ]; then out="$tmp/$outs"; else out="$tmp/"; fi
    # shellcheck disable=SC2086
    (cd "$dir" && go build -trimpath -tags="$tags" -ldflags="-s -w $extra" -o "$out" $pkgs)
    for o in $outs; do mv "$tmp/$o" "$cache/bin/$o"; done
    rm -rf "$tmp"
    echo "k8s-build: $outs built in $((SECONDS - t0)) s"
done
for pid in "${prefetch_pids[@]}"; do wait "$pid" || true; done

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
    [ -f "$f" ] || continue
    ln -sfn "$f" "$bin_dir/$(basename "$f")"
done
ln -sfn "$cache/kueue-crds" "$share_dir/kueue-crds"
echo "$k8s_version" > "$share_dir/version"
