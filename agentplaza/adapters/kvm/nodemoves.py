"""noded's side of a move (the guide's "Placement and moves"): exports and imports of sleeping machines.

The hub drives a move through these ops of both nodes; the pieces stream source node -> hub -> target
node over each node's channel, so the hub never holds more than a stream's window of an image:

- ``export_open`` (cid): the sleeping machine's files, held open (``vmm.move.Export``); its id, the file
  list and the machine's shape. Nothing else on the source stops.
- ``export_read`` (export): a stream of pieces, each ``PIECE_HEADER`` (file, offset, length) then its
  bytes; a piece that is all zeros is never sent (``Export.pieces`` skips it).
- ``export_manifest`` (export): after the read, each file's digest and the figures; ``export_close``.
- ``import_open`` (cid, body ``{"files"}``): a staging folder beside the machines (``vmm.move.Import``).
- ``import_write`` (import): the pieces the hub relays, written in place (zeros left as holes).
- ``import_finish`` (import, cid, shape, body: the manifest): every digest checked, the folder renamed
  into place, and a sleeping run made of it (the hub wakes it next); ``import_abort`` drops it.

Exports and imports live in memory and expire after ``vmm.move.EXPORT_TTL_S`` (``sweep``). An import
never replaces a machine this node runs; a folder left by an agent that is not running here (one that
moved away and back) is removed first, since the hub's records say the CID is not here.
"""

from __future__ import annotations

import json
import secrets
import shutil
import struct
import threading
from pathlib import Path
from typing import Any

from vmm import ChannelClosed, MachineSpec, StreamReset, VMError
from vmm.move import PIECE, Import, MoveError, Piece

#: Each piece on the wire: file index (u32), offset (u64), length (u32), big-endian; then the bytes.
PIECE_HEADER = struct.Struct(">IQI")
#: The most files one machine's export lists (disk layers, snapshots, checkpoints), and a path's length.
FILES_MAX = 4096
PATH_CHARS_MAX = 512
#: How long a stream of pieces waits for the other end before it gives up.
PIECE_TIMEOUT_S = 120.0


def check_files(files: Any) -> list[dict]:
    """An import's file list as the hub relays it from the export: bounded, typed, relative paths."""
    if not isinstance(files, list) or len(files) > FILES_MAX:
        raise MoveError(f"an import lists at most {FILES_MAX} files")
    out = []
    for f in files:
        if not isinstance(f, dict):
            raise MoveError("an import's file is an object")
        path, size, mode = f.get("path"), f.get("size"), f.get("mode", 0o600)
        if not isinstance(path, str) or not path or len(path) > PATH_CHARS_MAX or "\0" in path:
            raise MoveError(f"bad path in an import: {path!r}")
        if type(size) is not int or size < 0 or type(mode) is not int or not 0 <= mode <= 0o777:
            raise MoveError(f"bad size or mode for {path!r}")
        out.append({"path": path, "size": size, "mode": mode & 0o700})  # owner-only on the target
    return out


class Moves:
    """The exports and imports open on one node, by id."""

    def __init__(self, node) -> None:
        self.node = node
        self.lock = threading.Lock()
        self.exports: dict[str, dict] = {}   # id -> {"cid", "export", "read"}
        self.imports: dict[str, dict] = {}   # id -> {"cid", "import"}

    # -- expiry --------------------------------------------------------------------------------------
    def sweep(self) -> list[str]:
        """Drop the exports and imports past their time (an import's staging folder goes with it)."""
        gone = []
        with self.lock:
            for i, e in list(self.exports.items()):
                if e["export"].expired:
                    e["export"].close()
                    del self.exports[i]
                    gone.append(i)
            for i, m in list(self.imports.items()):
                if m["import"].expired:
                    m["import"].abort()
                    del self.imports[i]
                    gone.append(i)
        return gone

    def _export(self, meta: dict) -> dict:
        with self.lock:
            found = self.exports.get(str(meta.get("export") or ""))
        if found is None:
            raise MoveError("no such export (it expired or was closed)")
        return found

    def _import(self, meta: dict) -> dict:
        with self.lock:
            found = self.imports.get(str(meta.get("import") or ""))
        if found is None:
            raise MoveError("no such import (it expired, finished or was dropped)")
        return found

    # -- the source ------------------------------------------------------------------------------------
    def export_open(self, meta: dict) -> dict:
        node = self.node
        cid = int(meta["cid"])
        with node.lock:
            run = node.runs.get(cid)
        machine = run.machine if run is not None else node.backend.machine(
            MachineSpec(node.machine_name(cid), image=node.image()), node.vms_dir)
        if run is not None and not run.sleeping:
            raise VMError(f"agent {cid}'s machine is not asleep; it sleeps before it moves")
        exp = machine.export()   # refused unless asleep; holds its files open from here on
        eid = secrets.token_hex(8)
        with self.lock:
            self.exports[eid] = {"cid": cid, "export": exp, "read": False}
        spec = machine.spec
        return {"export": eid, "files": exp.files, "apparent_bytes": exp.apparent_bytes(),
                "vcpus": spec.vcpus, "memory_mib": spec.memory_mib}

    def export_read(self, st) -> None:
        """Stream the export's pieces, then close; a failure resets the stream (the hub aborts the move)."""
        try:
            e = self._export(st.meta)
            with self.lock:
                if e["read"]:
                    raise MoveError("an export is read once")
                e["read"] = True
            for p in e["export"].pieces():
                st.write(PIECE_HEADER.pack(p.file, p.offset, len(p.data)) + p.data, timeout=PIECE_TIMEOUT_S)
            st.close()
        except (ChannelClosed, StreamReset):
            pass
        except Exception as err:  # noqa: BLE001 - the hub hears why, as a reset
            try:
                st.reset(f"{type(err).__name__}: {err}")
            except Exception:
                pass

    def export_manifest(self, meta: dict) -> dict:
        exp = self._export(meta)["export"]
        return {"manifest": exp.manifest(), "bytes_read": exp.bytes_read, "bytes_sent": exp.bytes_sent,
                "apparent_bytes": exp.apparent_bytes()}

    def export_close(self, meta: dict) -> dict:
        with self.lock:
            e = self.exports.pop(str(meta.get("export") or ""), None)
        if e is not None:
            e["export"].close()
        return {"closed": e is not None}

    # -- the target ------------------------------------------------------------------------------------
    def import_open(self, meta: dict) -> dict:
        node = self.node
        cid = int(meta["cid"])
        files = check_files((meta.get("body") or {}).get("files"))
        with node.lock:
            run = node.runs.get(cid)
        if run is not None:
            raise MoveError(f"this node runs a machine for cid {cid}; it cannot import another")
        with self.lock:
            if any(m["cid"] == cid for m in self.imports.values()):
                raise MoveError(f"an import for cid {cid} is open already")
        stale = Path(node.vms_dir) / node.machine_name(cid)
        if stale.exists():  # files of an agent not running here: the hub's records place it elsewhere
            shutil.rmtree(stale)
        imp = Import(node.vms_dir, node.machine_name(cid), files)
        iid = secrets.token_hex(8)
        with self.lock:
            self.imports[iid] = {"cid": cid, "import": imp}
        return {"import": iid}

    def import_write(self, st) -> None:
        """Write the pieces the hub relays; answer with the bytes written (or the error) when it closes."""
        try:
            imp = self._import(st.meta)["import"]
            buf = bytearray()
            while True:
                data = st.read(1 << 20, timeout=PIECE_TIMEOUT_S)
                if not data:
                    break
                buf += data
                while len(buf) >= PIECE_HEADER.size:
                    f, off, n = PIECE_HEADER.unpack_from(buf, 0)
                    if n == 0 or n > PIECE:
                        raise MoveError(f"a piece is 1 to {PIECE} bytes, not {n}")
                    if len(buf) < PIECE_HEADER.size + n:
                        break
                    imp.write(Piece(f, off, bytes(buf[PIECE_HEADER.size:PIECE_HEADER.size + n])))
                    del buf[:PIECE_HEADER.size + n]
            if buf:
                raise MoveError("the stream of pieces ended inside a piece")
            st.write(json.dumps({"bytes_written": imp.bytes_written}).encode())
            st.close()
        except (ChannelClosed, StreamReset, TimeoutError):
            pass  # the hub went or gave up: it drops the import (or the node does, at its time limit)
        except Exception as err:  # noqa: BLE001 - the hub hears why at once, as a reset (it stops sending)
            try:
                st.reset(f"{type(err).__name__}: {err}")
            except Exception:
                pass

    def import_finish(self, meta: dict) -> dict:
        """Check and put the machine in place, then hold it as a sleeping run for the hub to wake."""
        node = self.node
        with self.lock:
            m = self.imports.pop(str(meta.get("import") or ""), None)
        if m is None:
            raise MoveError("no such import (it expired, finished or was dropped)")
        cid = m["cid"]
        manifest = (meta.get("body") or {}).get("manifest")
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
            m["import"].abort()
            raise MoveError("an import finishes with the export's manifest")
        m["import"].finish(manifest)   # aborts itself on a mismatch
        spec = MachineSpec(node.machine_name(cid), vcpus=int(meta.get("vcpus") or node.default_vcpus),
                           memory_mib=int(meta.get("memory_mib") or node.default_memory_mib),
                           image=node.image(), cid=cid)
        machine = node.backend.machine(spec, node.vms_dir, keep_alive=True)
        if not machine.sleeping:
            shutil.rmtree(Path(node.vms_dir) / node.machine_name(cid), ignore_errors=True)
            raise MoveError("the imported machine is not a sleeping one")
        node.adopt(cid, machine)
        return {"bytes_written": m["import"].bytes_written, "cid": cid}

    def import_abort(self, meta: dict) -> dict:
        with self.lock:
            m = self.imports.pop(str(meta.get("import") or ""), None)
        if m is not None:
            m["import"].abort()
        return {"dropped": m is not None}

    def close_all(self) -> None:
        with self.lock:
            for e in self.exports.values():
                e["export"].close()
            for m in self.imports.values():
                m["import"].abort()
            self.exports.clear()
            self.imports.clear()
