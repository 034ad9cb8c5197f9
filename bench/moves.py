"""A move of an agent's machine between two nodes against ``cp --sparse=always`` of the same files.

    python bench/moves.py [--data-mb 50]

Two noded nodes in this process, each on its own socket and folder, driven over their links by the
hub's own move code (``runtime.moves.copy_machine``: export, pieces relayed, import, finish). The agent's
machine has the default 1 GiB sparse workspace; ``--data-mb`` MB of random data are written in it, then
it sleeps. Measured in the same run:

- ``cp -r --sparse=always`` of the sleeping machine's folder to another folder (the baseline);
- the move: export, copy (4 MiB reads, 512 KiB pieces, zeros not sent), finish, wake on the target;
  its data bytes sent and its wire bytes against the files' apparent size.

Runs under ``flock /tmp/apz-vm.lock`` (it boots one microVM). The last line is the headline.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentplaza.adapters.kvm.link import NodeLink  # noqa: E402
from agentplaza.adapters.kvm.noded import Node, machine_name  # noqa: E402
from agentplaza.runtime.moves import copy_machine  # noqa: E402
from vmm.image import ensure_image  # noqa: E402

CID = 50
IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(Path.home() / ".local/share/agentplaza/images")


def serve(node: Node, sock: Path) -> tuple[threading.Event, NodeLink]:
    stop = threading.Event()
    threading.Thread(target=node.serve, args=(sock, stop), daemon=True).start()
    end = time.monotonic() + 10
    while not sock.exists() and time.monotonic() < end:
        time.sleep(0.01)
    return stop, NodeLink(sock, lambda *a: None).connect()


def allocated(folder: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def apparent(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-mb", type=int, default=50)
    args = ap.parse_args()
    image = ensure_image(IMAGES)
    with tempfile.TemporaryDirectory(prefix="apz-moves-") as tmp:
        tmp = Path(tmp)
        os.chmod(tmp, 0o755)
        n0, n1 = Node("n0", tmp / "n0" / "vms", image=image), Node("n1", tmp / "n1" / "vms", image=image)
        (s0, l0), (s1, l1) = serve(n0, tmp / "n0.sock"), serve(n1, tmp / "n1.sock")
        try:
            l0.request("start", timeout=180, cid=CID, identity="bench:0")
            m = n0.runs[CID].machine
            rc, out = m.exec(["sh", "-c", f"head -c {args.data_mb * 1_000_000} /dev/urandom > /workspace/data.bin; "
                                          "sync; sha256sum /workspace/data.bin"], timeout=300)
            assert rc == 0, out
            want = out.split()[0]
            l0.request("sleep", timeout=300, cid=CID)
            folder = tmp / "n0" / "vms" / machine_name(CID)
            files_apparent, files_allocated = apparent(folder), allocated(folder)

            t0 = time.monotonic()
            subprocess.run(["cp", "-r", "--sparse=always", str(folder), str(tmp / "cp-copy")], check=True)
            cp_s = time.monotonic() - t0
            cp_allocated = allocated(tmp / "cp-copy")

            t0 = time.monotonic()
            figures = copy_machine(l0, l1, CID, {})
            copy_s = time.monotonic() - t0
            woke = l1.request("wake", timeout=300, cid=CID)
            move_s = time.monotonic() - t0
            l0.request("delete", timeout=120, cid=CID)
            rc, out = n1.runs[CID].machine.exec(["sha256sum", "/workspace/data.bin"], timeout=120)
            assert rc == 0 and out.split()[0] == want, out
        finally:
            for link, stop in ((l0, s0), (l1, s1)):
                link.close()
                stop.set()
            n0.stop_all()
            n1.stop_all()
    mb = 1e6
    print(f"machine files: {files_apparent / mb:.1f} MB apparent, {files_allocated / mb:.1f} MB allocated "
          f"({args.data_mb} MB of data written in the 1 GiB workspace)")
    print(f"cp -r --sparse=always: {cp_s:.2f} s, {cp_allocated / mb:.1f} MB allocated in the copy")
    print(f"move: {figures['bytes_moved'] / mb:.1f} MB of data sent ({figures['wire_bytes'] / mb:.1f} MB on the wire), "
          f"export+copy+finish {copy_s:.2f} s, then wake {woke.get('wake_s')} s: {move_s:.2f} s in all; "
          "the workspace's data arrived intact (sha256 checked)")
    print(f"move vs cp --sparse=always of the same files: {copy_s / cp_s:.2f}x the time, "
          f"{figures['bytes_moved'] / cp_allocated:.2f}x the bytes cp wrote "
          f"({figures['bytes_moved'] / files_apparent:.3f} of the files' apparent size sent)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
