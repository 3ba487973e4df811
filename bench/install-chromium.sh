#!/usr/bin/env bash
# Chromium for the report's headless-browser check (tests/e2e/report_browser.sh),
# a peer tool only: not one of aorta's dependencies (scripts/install-deps.sh).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    echo "chromium: $(command -v chromium)"
    exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium
command -v chromium
