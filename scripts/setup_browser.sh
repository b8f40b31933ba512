#!/usr/bin/env bash
# Installs Debian's headless Chromium for the trajectory viewer's browser test, when possible.
# Never fails setup: without root or apt the viewer test is skipped with a message saying so.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing Debian chromium for the viewer test (one time)"
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); then
    echo "setup: chromium could not be installed; the viewer's browser test will be skipped" >&2
  fi
else
  echo "setup: no chromium and no root apt-get; the viewer's browser test will be skipped" >&2
fi
