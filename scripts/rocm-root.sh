#!/usr/bin/env bash
# The Debian 13 (trixie) root that aorta's HIP backend is built in: Debian 13's
# ROCm packages (hipcc 5.7.1, RCCL, hipBLAS, rocBLAS, rocm-smi, amd-smi) need
# its C library, so they live in a root of their own, not beside the host's.
#
#   scripts/rocm-root.sh [make]        make the root, or say it is ready
#   scripts/rocm-root.sh run DIR CMD…  run CMD in the root with DIR (a source
#                                      tree) bound at /src, cwd /src
#   scripts/rocm-root.sh path          print the root's directory
#   scripts/rocm-root.sh ready         exit 0 when the root is made, else 1
#
# The root is cached outside the clone (AORTA_ROCM_ROOT, default
# /var/cache/aorta/rocm-root-trixie) and made once: a stamp per stage names
# what it holds, so a second call does nothing and a changed package list only
# installs what is new. Mirror: AORTA_ROCM_MIRROR, else the Debian URI in
# /etc/apt/sources.list*. Needs root (debootstrap, chroot, bind mounts).
# Exit: 0 ready, 1 failed, 2 bad use, 3 the mirror cannot be reached.
set -euo pipefail

root=${AORTA_ROCM_ROOT:-/var/cache/aorta/rocm-root-trixie}
suite=trixie
# hipBLASLt, rocprofiler-sdk and roctracer (roctx) are not in Debian 13.
rocm_packages=(hipcc libamdhip64-dev librccl-dev libhipblas-dev librocblas-dev libhipcub-dev
               librocprim-dev rocm-smi librocm-smi-dev libamd-smi-dev)
# what aorta's CMake needs (scripts/install-deps.sh, less MPI, cairo and
# the tools of the host's test build)
build_packages=(cmake make gcc g++ pkg-config libyaml-dev libyajl-dev zlib1g-dev libsqlite3-dev
                libcmocka-dev libopenblas-dev python3 file git)

say() { echo "rocm-root: $*"; }
die() {
    echo "rocm-root: $2" >&2
    exit "$1"
}

# The Debian archive URI from this machine's apt sources (deb822 or one-line).
find_mirror() {
    if [[ -n ${AORTA_ROCM_MIRROR:-} ]]; then
        echo "$AORTA_ROCM_MIRROR"
        return
    fi
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
        [[ -f $f ]] || continue
        uri=$(sed -nE -e 's/^URIs:[[:space:]]*([^[:space:]]+\/debian)\/?([[:space:]].*)?$/\1/p' \
            -e 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+\/debian)\/?[[:space:]].*/\2/p' "$f" |
            head -n1)
        if [[ -n $uri ]]; then
            echo "$uri"
            return
        fi
    done
    echo http://deb.debian.org/debian
}

# One clear line, exit 3, when the mirror's trixie Release file cannot be had.
check_mirror() {
    local mirror=$1 err
    if command -v curl >/dev/null 2>&1; then
        if ! err=$(curl -fsS --max-time 30 -o /dev/null "$mirror/dists/$suite/Release" 2>&1); then
            die 3 "cannot reach the Debian mirror $mirror ($mirror/dists/$suite/Release: ${err##*: }); set AORTA_ROCM_MIRROR to one that serves $suite"
        fi
    elif ! err=$(wget -q -T 30 -O /dev/null "$mirror/dists/$suite/Release" 2>&1); then
        die 3 "cannot reach the Debian mirror $mirror ($mirror/dists/$suite/Release: ${err:-wget failed}); set AORTA_ROCM_MIRROR to one that serves $suite"
    fi
}

# Run CMD inside the root in a private mount namespace: the bind mounts go
# away with the command, whatever way it ends.
in_root() {
    local src=$1
    shift
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --propagation private -- /bin/sh -euc '
        root=$1 src=$2; shift 2
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/tmp"
        cwd=/
        if [ -n "$src" ]; then mount --bind "$src" "$root/src" && cwd=/src; fi
        exec chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root \
            LANG=C.UTF-8 TERM=dumb CI="${CI:-}" DEBIAN_FRONTEND=noninteractive \
            /bin/sh -c "cd $cwd && exec \"\$@\"" in-root "$@"
    ' sh "$root" "$src" "$@"
}

stamp_of() { printf '%s\n' "$@" | sha256sum | cut -c1-16; }

make_root() {
    [[ $(id -u) -eq 0 ]] || die 1 "needs root (debootstrap, chroot and bind mounts)"
    local mirror start packages_stamp
    mirror=$(find_mirror)
    start=$(date +%s)
    mkdir -p "$(dirname "$root")"
    exec 9>"$root.lock"
    flock 9 # one maker at a time (CI and a developer on one machine)

    packages_stamp=$(stamp_of "${rocm_packages[@]}" "${build_packages[@]}")
    if [[ -f $root/.aorta-packages && $(cat "$root/.aorta-packages") == "$packages_stamp" ]]; then
        say "ready: $root ($(du -sh --one-file-system "$root" | cut -f1)); $(cat "$root/.aorta-made")"
        return 0
    fi
    check_mirror "$mirror"

    if [[ ! -f $root/.aorta-base ]]; then
        command -v debootstrap >/dev/null 2>&1 || {
            say "installing debootstrap on the host"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
                { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
        }
        say "debootstrap $suite from $mirror into $root (about 300 MB, a few minutes)"
        rm -rf "$root.partial"
        if ! debootstrap --variant=minbase "$suite" "$root.partial" "$mirror" >"$root.debootstrap.log" 2>&1; then
            tail -n 5 "$root.debootstrap.log" >&2
            die 1 "debootstrap failed; the whole log is $root.debootstrap.log"
        fi
        mkdir -p "$root.partial/src"
        date -u +%FT%TZ >"$root.partial/.aorta-base"
        rm -rf "$root"
        mv "$root.partial" "$root"
    fi

    say "installing ${#rocm_packages[@]} ROCm and ${#build_packages[@]} build packages in the root (about 3 GB)"
    printf 'deb %s %s main\n' "$mirror" "$suite" >"$root/etc/apt/sources.list"
    if ! in_root "" /bin/sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $(printf '%s ' "${rocm_packages[@]}" "${build_packages[@]}") && apt-get clean" \
        >"$root.apt.log" 2>&1; then
        tail -n 5 "$root.apt.log" >&2
        die 1 "apt-get install in the root failed; the whole log is $root.apt.log"
    fi
    local secs=$(($(date +%s) - start))
    echo "made in ${secs}s on $(date -u +%F) ($(nproc) cores)" >"$root/.aorta-made"
    echo "$packages_stamp" >"$root/.aorta-packages"
    say "ready: $root ($(du -sh --one-file-system "$root" | cut -f1)), made in ${secs}s"
}

case ${1:-make} in
make) make_root ;;
path) echo "$root" ;;
ready) [[ -f $root/.aorta-packages && $(cat "$root/.aorta-packages") == "$(stamp_of "${rocm_packages[@]}" "${build_packages[@]}")" ]] ;;
run)
    [[ $# -ge 3 ]] || die 2 "usage: $0 run SRC_DIR CMD..."
    [[ -f $root/.aorta-packages ]] || die 1 "no root at $root: run $0 first"
    src=$(cd "$2" && pwd)
    shift 2
    in_root "$src" "$@"
    ;;
*) die 2 "usage: $0 [make | path | ready | run SRC_DIR CMD...]" ;;
esac
