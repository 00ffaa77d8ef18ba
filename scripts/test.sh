#!/usr/bin/env bash
# The one test command (README's "Two commands" and CI's .ci/run both call this file): install what the tests need
# on a fresh machine, then run the suite. Arguments go to pytest (e.g. `bash scripts/test.sh tests/test_cli.py -x`).
#
# Installs: torch==2.13.0 (the CPU build on a machine without CUDA), kernelpilot in editable mode with its `test`
# extra (pytest-xdist runs the files on every core), and Debian's Chromium for report.html's browser test (tests/test_report_html.py; never a Playwright
# browser download) when it is missing, through apt-get as root (or `sudo -n` when that works without a password).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check torch==2.13.0 -e '.[test]'
chromium_bin="${KERNELPILOT_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium_bin" ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "scripts/test.sh: no Chromium at $chromium_bin and not root: install it (apt-get install -y chromium)" \
             "or set KERNELPILOT_CHROMIUM; tests/test_report_html.py needs it" >&2
    fi
fi
# one pytest worker per CPU core, each test file kept on one worker (its module fixtures are built once): the suite
# took 28 min on one process on a 2-core machine, 15 min on two
exec python3 -m pytest -q -n auto --dist loadfile "$@"
