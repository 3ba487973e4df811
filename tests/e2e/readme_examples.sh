#!/usr/bin/env bash
# The README's Examples block, run verbatim and in order, as a newcomer would
# from the top of a fresh clone: every command not marked [GPU] in the comment
# above it, in a scratch directory holding the clone's config/, examples/,
# tests/ and build/aorta. Read from README.md itself, so the two cannot drift.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

# One command per line (continuations joined), without the [GPU] ones.
python3 - "$src/README.md" >"$tmp/examples" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
block = re.search(r"## Examples\n.*?```sh\n(.*?)```", text, re.S).group(1)
comment, cmd, in_comment = "", "", False
for line in block.splitlines():
    if not cmd and line.startswith("#"):
        # Consecutive comment lines are one comment: the commands after it.
        comment = comment + line if in_comment else line
        in_comment = True
        continue
    in_comment = False
    cmd = (cmd + " " + line.strip()) if cmd else line.strip()
    if cmd.endswith("\\"):
        cmd = cmd[:-1].rstrip()
        continue
    if "[GPU]" not in comment:
        print(cmd)
    cmd = ""
PY
[ -s "$tmp/examples" ] || fail "no examples found in README.md"

work="$tmp/clone"
mkdir -p "$work/build"
ln -s "$src/config" "$work/config"
ln -s "$src/examples" "$work/examples"
ln -s "$src/tests" "$work/tests"
ln -s "$(realpath "$aorta")" "$work/build/aorta"
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    echo "example $n: $cmd"
    # Verbatim: the line as the README prints it, through the shell.
    if ! (cd "$work" && bash -c "$cmd") >"$tmp/ex$n.out" 2>&1 </dev/null; then
        fail "README example $n exited non-zero: $cmd"
        sed 's/^/    /' "$tmp/ex$n.out" | tail -20
    fi
done <"$tmp/examples"
[ "$n" -ge 6 ] || fail "only $n CPU examples found"
for page in base-vs-ddp healthy-vs-late; do
    [ -f "$work/artifacts/$page/index.html" ] || fail "the report example wrote no $page/index.html"
done
# every output under the one git-ignored folder
for f in "$work"/* "$work"/.[!.]*; do
    [ -e "$f" ] || continue
    case ${f##*/} in
    build | config | examples | tests | artifacts) ;;
    *) fail "the examples wrote outside artifacts/: ${f##*/}" ;;
    esac
done
finish readme_examples
