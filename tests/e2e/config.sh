#!/usr/bin/env bash
# aorta config show|validate|doc end to end: exit codes, typed overrides with
# origins, one-line errors, and docs/config.md equal to `aorta config doc`.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# shellcheck source=/dev/null
. "$(dirname "$0")/lib/assert.sh"

# The shipped configs are valid and carry no key the code ignores; the seed's
# own file loads, with one warning about its no-op keys.
for f in default tiny large; do
    run_expect 0 "$TMP/out" config validate --config "$SRC/config/$f.yaml"
    contains "$TMP/out" "ok: $SRC/config/$f.yaml"
    ! grep -q 'warning' "$TMP/out" || fail "config/$f.yaml: $(cat "$TMP/out")"
done
run_expect 0 "$TMP/out" config validate --config "$SRC/tests/data/seed_default.yaml"
[[ $(grep -c 'warning' "$TMP/out") -eq 1 ]] || fail "want one summary line of the no-effect keys"
contains "$TMP/out" "15 keys from the reference toolkit's format are accepted and ignored: "
run_expect 0 "$TMP/out" config validate --config "$SRC/config/default.yaml" --override compile.mode=x
contains "$TMP/out" "--override: compile.mode has no effect in aorta"
run_expect 0 "$TMP/out" config validate
contains "$TMP/out" "ok: (defaults)"

# Typed overrides, several words after one --override, with their origins.
run_expect 0 "$TMP/show" config show --override training.max_steps=3 'optimizer.betas=[0.9,0.95]'
grep -Eq '^  max_steps: 3 +# --override$' "$TMP/show" || fail "max_steps not overridden"
grep -Eq '^  betas: \[0.9, 0.95\] +# --override$' "$TMP/show" || fail "betas not overridden"
grep -Eq '^  batch_size: 8 +# default$' "$TMP/show" || fail "batch_size origin"
grep -Eq '^  limit_all_gathers: 2 +# default$' "$TMP/show" || fail "limit_all_gathers"

# Repeated --override (a later one wins), --override=K=V, and case-insensitive enums.
run_expect 0 "$TMP/show" config show --config "$SRC/config/tiny.yaml" \
    --override training.max_steps=40 --override training.max_steps=50 \
    --override=fsdp.backward_prefetch=backward_post model.ff_dim=null --no-origins
grep -Eq '^  max_steps: 50$' "$TMP/show" || fail "later override should win"
grep -Eq '^  backward_prefetch: BACKWARD_POST$' "$TMP/show" || fail "enum override"
grep -Eq '^  ff_dim: null$' "$TMP/show" || fail "null override"
grep -Eq '^  model_dim: 64$' "$TMP/show" || fail "tiny.yaml not loaded"
# What show prints is a config that loads back to the same thing.
"$AORTA" config show --config "$TMP/show" --no-origins >"$TMP/again" 2>"$TMP/err"
cmp -s "$TMP/show" "$TMP/again" || fail "show output does not read back the same"
[[ ! -s "$TMP/err" ]] || { cat "$TMP/err" >&2; fail "show output warns when read back"; }
run_expect 0 "$TMP/out" config show --config "$SRC/config/default.yaml"
grep -Eq "^  batch_size: 8 +# $SRC/config/default.yaml:8$" "$TMP/out" || fail "file origin"

# Errors: exit 2, one line, naming the keys.
run_expect 2 "$TMP/err" config validate --override model.num_heads=7
contains "$TMP/err" "model.model_dim = 768 (default) and model.num_heads = 7 (--override)"
[[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "error is not one line"
run_expect 2 "$TMP/err" config validate --override training.batch_sise=4
contains "$TMP/err" "did you mean 'training.batch_size'?"
run_expect 2 "$TMP/err" config show --override training.batch_size=abc
contains "$TMP/err" "--override: training.batch_size: 'abc' is not an integer"
printf 'training:\n  mixed_precision: fp16\n  loss_scale: 0\n' >"$TMP/scale.yaml"
run_expect 2 "$TMP/err" config validate --config "$TMP/scale.yaml"
contains "$TMP/err" "$TMP/scale.yaml:3:15: training.loss_scale"
[[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "loss_scale error is not one line"
run_expect 2 "$TMP/err" config validate --config "$TMP/nonexistent.yaml"
contains "$TMP/err" "cannot read the config file"
printf 'training:\n  batch_size: [4\n' >"$TMP/bad.yaml"
run_expect 2 "$TMP/err" config validate --config "$TMP/bad.yaml"
contains "$TMP/err" "$TMP/bad.yaml:3:1: YAML syntax error"
run_expect 2 "$TMP/err" config validate --override
run_expect 2 "$TMP/err" config show --bogus
run_expect 2 "$TMP/err" config frobnicate
run_expect 2 "$TMP/err" config

# Help.
for sub in "" show validate doc; do
    run_expect 0 "$TMP/help" config $sub --help
    contains "$TMP/help" "usage: aorta config"
done
run_expect 0 "$TMP/help" help config

# The reference in the repository is exactly what the schema prints.
run_expect 0 "$TMP/doc.md" config doc
diff -u "$SRC/docs/config.md" "$TMP/doc.md" >&2 ||
    fail "docs/config.md is stale: run 'aorta config doc > docs/config.md'"

echo "config e2e: ok"
