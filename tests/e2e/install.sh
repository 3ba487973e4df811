#!/usr/bin/env bash
# The packages (cmake/install.cmake): cpack makes the .tar.gz and the .deb of
# this build; the tarball unpacked into a scratch prefix runs analyze, report
# (with its charts' plugin) and a 2-rank CPU train (with the MPI plugin) from
# there, with the configs it ships, and its aorta finds its libraries in the
# prefix, not in the build tree.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=$(dirname "$aorta")
# MPI's leaks resolve to its own frames (tests/lsan.supp) only with slow unwinding.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
# aorta finds its plugins relative to itself here, as it does for a user
unset AORTA_PLUGIN_DIR
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
command -v cpack >/dev/null || { echo "SKIP: no cpack"; exit 77; }

(cd "$build" && cpack -G "TGZ;DEB" -B "$tmp/pkg") >"$tmp/cpack.log" 2>&1 ||
    { cat "$tmp/cpack.log"; fail "cpack failed"; finish install; }
tgz=$(find "$tmp/pkg" -maxdepth 1 -name 'aorta-*.tar.gz' | head -1)
deb=$(find "$tmp/pkg" -maxdepth 1 -name 'aorta_*.deb' | head -1)
[ -n "$tgz" ] || fail "no .tar.gz in $(ls "$tmp/pkg")"
[ -n "$deb" ] || fail "no .deb in $(ls "$tmp/pkg")"
if [ -n "$deb" ] && command -v dpkg-deb >/dev/null; then
    dpkg-deb -c "$deb" >"$tmp/deb.txt" || fail "dpkg-deb cannot read $deb"
    for f in ./usr/bin/aorta ./usr/share/aorta/config/tiny.yaml ./usr/share/doc/aorta/README.md; do
        grep -q " $f\$" "$tmp/deb.txt" || fail "the .deb lacks $f"
    done
    dpkg-deb -f "$deb" Depends | grep -q libyajl || fail "the .deb names no dependencies"
fi
[ -n "$tgz" ] || finish install

prefix="$tmp/prefix"
mkdir -p "$prefix"
tar -xzf "$tgz" -C "$prefix" --strip-components=1 || fail "cannot unpack $tgz"
bin="$prefix/bin/aorta"
for f in bin/aorta share/aorta/config/tiny.yaml share/aorta/config/default.yaml \
    share/aorta/examples/sweeps/rccl_cta_sweep.yaml share/doc/aorta/README.md \
    share/doc/aorta/DESIGN.md share/doc/aorta/LICENSE; do
    [ -e "$prefix/$f" ] || fail "the tarball lacks $f"
done
# Every plugin and attach library this build made is in lib/aorta/.
for lib in "$build"/libaorta_*.so; do
    [ -e "$lib" ] || continue
    [ -e "$prefix/lib/aorta/$(basename "$lib")" ] || fail "lib/aorta/ lacks $(basename "$lib")"
done
# No rpath into the build tree: a plugin found there would hide a broken install.
for f in "$bin" "$prefix"/lib/aorta/*.so; do
    if readelf -d "$f" | grep -iE 'rpath|runpath' | grep -qF "$build"; then
        fail "$f has an rpath into the build tree"
    fi
done

mkdir -p "$tmp/work"
cd "$tmp/work" || exit 1
"$bin" analyze "$src/tests/data/fsdp2_default_h200x2" --output runs --run-name job \
    >analyze.log 2>&1 || fail "installed analyze: $(tail -5 analyze.log)"
grep -q 'step' analyze.log || fail "analyze printed no table"
if "$bin" --version | grep -q '^comm backends:.*mpi'; then
    LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$bin" train --backend cpu --nproc 2 \
        --config "$prefix/share/aorta/config/tiny.yaml" --run-name base \
        --override training.output_dir=runs training.max_steps=8 >train.log 2>&1 ||
        fail "installed train: $(tail -5 train.log)"
    [ -f runs/base/summary.json ] || fail "train wrote no summary.json"
    grep -qh "file=$prefix/bin/../lib/aorta/libaorta_mpi.so" "$tmp"/ld.* ||
        fail "train did not load the prefix's libaorta_mpi.so"
    rm -f "$tmp"/ld.*
fi
LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$bin" report --log-dir runs/job --label job \
    --output report >report.log 2>&1 || fail "installed report: $(tail -5 report.log)"
[ -f report/index.html ] || fail "report wrote no index.html"
if [ -e "$build/libaorta_cairo.so" ]; then
    [ -f report/job_timeline.svg ] || fail "report drew no charts from the prefix"
    grep -qh "file=$prefix/bin/../lib/aorta/libaorta_cairo.so" "$tmp"/ld.* ||
        fail "report did not load the prefix's libaorta_cairo.so"
fi
finish install
