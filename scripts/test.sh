#!/usr/bin/env bash
# Install everything the tests need, then run every test.
#   bash scripts/test.sh [pytest arguments]
# System packages: PostgreSQL (the tests start their own server, on their own port),
# QEMU and the guest-image tools (the microVM tests boot real guests), Chromium (the browser tests
# drive Debian's headless Chromium through Playwright; never `playwright install`).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v lz4 >/dev/null || need+=(lz4)
command -v zstd >/dev/null || need+=(zstd)
command -v cpio >/dev/null || need+=(cpio)
command -v cc >/dev/null || need+=(gcc)
dpkg -s libc6-dev >/dev/null 2>&1 || need+=(libc6-dev)
command -v git >/dev/null || need+=(git)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v chromium >/dev/null || need+=(chromium)
command -v npm >/dev/null || need+=(npm)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "test.sh: missing system packages: ${need[*]} (sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# axe-core, from the npm registry, for the console's accessibility check (tests/browser/test_console.py).
[ -f .cache/npm/node_modules/axe-core/axe.min.js ] || npm install -s --no-audit --no-fund --prefix .cache/npm axe-core@4
# Several workers (pytest-xdist): most tests wait on a hub process, a browser or PostgreSQL, so two cores
# keep more than two busy. Tests that boot microVMs run on one worker, in turn (tests/conftest.py).
exec .venv/bin/python -m pytest -n "${APZ_TEST_WORKERS:-3}" --dist loadgroup "$@"
