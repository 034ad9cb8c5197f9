#!/usr/bin/env bash
# The first start: install what running agents needs, build the guest image once, start the hub.
#   bash scripts/install.sh [apid flags]   install, build, then run apid (e.g. --bind 127.0.0.1:7700)
#   bash scripts/install.sh --check        say what is missing and change nothing (exit 1 when something is)
# System packages (QEMU, qemu-img, zstd, the guest image's tools) are installed with apt when run as
# root; otherwise the one `sudo apt-get install ...` line to run is printed. The list is vmm/readiness.py's,
# the same one node n0 and `agentplaza doctor` use.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
say() { echo "install.sh: $*"; }
images=()
if [ -n "${APZ_IMAGE_DIR:-}" ]; then images=(--data-dir "$APZ_IMAGE_DIR"); fi

# 1. The system packages (vmm is standard library only: the system's python3 reads its list).
need=$(PYTHONPATH=. python3 -m vmm.readiness packages)
if [ -n "$need" ]; then
  if [ "$check" = 1 ]; then
    say "missing system packages: $need"
    say "  sudo apt-get install -y $need"
  elif [ "$(id -u)" = 0 ]; then
    say "installing $need"
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
  else
    say "agents need system packages this user cannot install; run this, then install.sh again:"
    echo "  sudo apt-get install -y $need"
    exit 1
  fi
else
  say "system packages: every one agents need is installed"
fi

# 2. The plaza itself, in .venv.
missing=0
[ -n "$need" ] && missing=1
if [ "$check" = 1 ]; then
  if [ -x .venv/bin/apid ]; then say "the plaza is installed in .venv"
  else say "the plaza is not installed yet (install.sh makes .venv)"; missing=1; fi
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -e .
  say "the plaza is installed in .venv"
fi

# 3. The guest image, built once (a progress line per step); later starts reuse it.
if PYTHONPATH=. python3 -m vmm.image show "${images[@]}" >/dev/null 2>&1; then
  say "the guest image is built"
elif [ "$check" = 1 ]; then
  say "the guest image is not built yet (install.sh builds it once, in a few minutes)"; missing=1
else
  say "building the guest image (once; a few minutes)"
  .venv/bin/python -m vmm.image build "${images[@]}"
fi

# 4. What would still stop an agent's microVM from booting; then the hub.
if ! blockers=$(PYTHONPATH=. python3 -m vmm.readiness check "${images[@]/--data-dir/--images-dir}"); then
  say "an agent's microVM cannot boot here yet:"
  echo "$blockers" | sed 's/^/  /'
  missing=1
fi
if [ "$check" = 1 ]; then
  if [ "$missing" = 0 ]; then say "ready: nothing to install; install.sh would start the hub"; exit 0; fi
  exit 1
fi
# The next command, as it reads for this hub: one bound elsewhere than the default is named with --hub.
hub=""
prev=""
for a in "$@"; do
  case "$a" in
    --bind=*) hub="${a#--bind=}" ;;
    *) [ "$prev" = "--bind" ] && hub="$a" ;;
  esac
  prev="$a"
done
next=".venv/bin/agentplaza agents create --role researcher --count 1"
# A hub bound off loopback (or given --https) serves HTTPS only, with its own certificate: its address is
# https://, and the CLI pins the certificate by the SHA-256 apid prints on start (docs/nodes.md).
https=""
case " $* " in *" --https "*) https=1 ;; esac
case "$hub" in
  ""|127.*|localhost:*|"[::1]:"*) ;;
  *) https=1 ;;
esac
if [ -n "$https" ]; then
  next=".venv/bin/agentplaza --hub https://${hub:-127.0.0.1:7700} --pin SHA256 agents create --role researcher --count 1 (SHA256: the certificate's, as apid prints it below)"
elif [ -n "$hub" ] && [ "$hub" != "127.0.0.1:7700" ]; then
  next=".venv/bin/agentplaza --hub http://$hub agents create --role researcher --count 1"
fi
say "starting the hub (Ctrl-C stops it); then, in another terminal: $next"
exec .venv/bin/apid "$@"
