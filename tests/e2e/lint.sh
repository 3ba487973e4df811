#!/usr/bin/env bash
# Lint as a test: every C/CUDA file clang-formatted with the repo's
# .clang-format, every shell script clean under shellcheck, DESIGN.md's table
# of contents up to date (scripts/design-toc.sh).
# scripts/install-deps.sh installs both tools; without them this test is skipped.
set -euo pipefail
cd "${AORTA_SOURCE_DIR:?}"
if ! command -v clang-format >/dev/null || ! command -v shellcheck >/dev/null; then
    echo "SKIP: clang-format or shellcheck not installed"
    exit 77
fi
git ls-files >/dev/null 2>&1 || {
    echo "SKIP: not a git checkout"
    exit 77
}
bad=0
while IFS= read -r f; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || {
        echo "not clang-formatted: $f (run: make format)"
        bad=1
    }
done < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
shellcheck "${scripts[@]}" || bad=1
scripts/design-toc.sh --check || bad=1
exit "$bad"
