#!/usr/bin/env bash
# Installs Debian's chromium package for the Web UI browser test (test/integration/web-ui.test.ts), which drives it
# headless through playwright-core. Does nothing when a Chromium is already there; .ci/run calls it before `npm test`.
#
#   scripts/setup-browser.sh            install when missing (apt-get; sudo when not root)
#   ADCP_CHROMIUM_PATH=/path/chromium   use another Chromium build (macOS, other distributions): nothing to install
set -euo pipefail

found() {
  printf 'setup-browser: %s (%s)\n' "$1" "$("$1" --version 2>/dev/null || echo 'version unknown')"
}

if [ -n "${ADCP_CHROMIUM_PATH:-}" ]; then
  if [ -x "$ADCP_CHROMIUM_PATH" ]; then found "$ADCP_CHROMIUM_PATH"; exit 0; fi
  echo "setup-browser: ADCP_CHROMIUM_PATH=$ADCP_CHROMIUM_PATH is not an executable file." >&2
  exit 1
fi
if command -v chromium >/dev/null 2>&1; then found "$(command -v chromium)"; exit 0; fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-browser: no chromium and no apt-get: install Chromium and set ADCP_CHROMIUM_PATH to its executable." >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
echo "setup-browser: installing Debian's chromium package"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium
found "$(command -v chromium)"
