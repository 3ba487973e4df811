#!/usr/bin/env bash
# Rewrites the table of contents of docs/DESIGN.md from its "## " headings
# (between the "<!-- toc -->" and "<!-- /toc -->" lines).
#   scripts/design-toc.sh [--check]   (--check: exit 1 if it is stale)
set -euo pipefail
doc=$(dirname "$0")/../docs/DESIGN.md
toc=$(grep -E '^## ' "$doc" | sed -E 's/^## //' | while IFS= read -r h; do
    anchor=$(printf '%s' "$h" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g')
    printf -- '- [%s](#%s)\n' "$h" "$anchor"
done)
new=$(awk -v toc="$toc" '/^<!-- toc -->$/ { print; print toc; skip = 1; next }
    /^<!-- \/toc -->$/ { skip = 0 } !skip { print }' "$doc")
if [[ ${1:-} == --check ]]; then
    [[ $new == "$(cat "$doc")" ]] || { echo "docs/DESIGN.md: table of contents is stale (scripts/design-toc.sh)"; exit 1; }
    exit 0
fi
printf '%s\n' "$new" >"$doc"
