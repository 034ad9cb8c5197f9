"""Warm templates: one saved machine per exact shape, restored instead of a cold boot.

A template is keyed by a hash of the machine's shape (vCPUs, memory, workspace
size, kernel command line, accelerator, channel), the hash of each image file
(kernel, initramfs, root) and the VMM version, so a rebuilt guest never restores
an old template. The first machine of a shape boots cold; once its guest is
ready it is paused, saved (memory, devices and its workspace as it is at that
moment) into ``<templates>/<key>/`` and resumed. A later machine of that shape
gets a copy of the template's workspace and a restore of its memory.

Templates carry no volumes: a machine with volumes always boots cold.

``Templates(root, parked={name: {"argv": [...], "cwd": ..., "env": {...}}})``: before a template is
saved, each of those programs is started in the guest and held (channeld's ``park``), so every machine
restored from it has them started, imported and waiting; ``machine.parked`` names them, and
``machine.unpark(name)`` lets one go on (the node's harness: no Python start on the spawn path). The
programs are part of the key: a store with other programs parked never restores this template.
Removing a template does not touch machines restored from it (each has its
own copy of the workspace).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from . import snapshot as snap
from .disks import Chain, sparse_copy


def templates_dir(explicit: os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get("APZ_DATA_DIR"):
        return Path(os.environ["APZ_DATA_DIR"]) / "templates"
    return Path.home() / ".local/share/agentplaza/templates"


def key_of(shape: dict, backend: str, parked: dict | None = None) -> str:
    """The template key of a shape and the programs parked in it (pure)."""
    doc = {"backend": backend, "vmm_version": shape.get("vmm_version"),
           "artifacts": shape.get("artifacts"), "image": shape.get("image"),
           "vcpus": shape.get("vcpus"), "memory_mib": shape.get("memory_mib"),
           "workspace_mib": shape.get("workspace_mib"), "cmdline": shape.get("cmdline"),
           "accel": shape.get("accel"), "channel": shape.get("channel")}
    if parked:
        doc["parked"] = parked
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


class Templates:
    def __init__(self, root: os.PathLike | None = None, parked: dict | None = None) -> None:
        self.root = templates_dir(root)
        self.parked = dict(parked or {})

    def key(self, machine) -> str:
        return key_of(machine.shape(), machine.backend_name, self.parked)

    def find(self, machine) -> tuple | None:
        """(key, folder, manifest) of the template for machine's shape, or None."""
        if machine.spec.volumes:
            return None
        key = self.key(machine)
        folder = self.root / key
        try:
            man = snap.read(folder)
            snap.check_restorable(man, machine.backend_name, machine.shape(), [])
        except snap.SnapshotError:
            return None
        return key, folder, man

    def save(self, machine) -> str | None:
        """Save a running, ready machine as its shape's template (if there is none)."""
        if machine.spec.volumes:
            return None
        key = self.key(machine)
        folder = self.root / key
        if (folder / snap.MANIFEST).exists():
            return key
        for name, prog in self.parked.items():   # started and held in the guest the template keeps
            if name not in machine.parked:
                machine.park(name, prog["argv"], prog.get("cwd"), prog.get("env"))
        self.root.mkdir(parents=True, exist_ok=True)
        work = self.root / f".{key}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            with machine._lock:
                man = machine._save_running(work / "state", "template", key, "", memory=True,
                                            compression="none")
            # the frozen layers are written by nobody now: copy them at leisure
            (work / "disks").mkdir()
            for name in man.layers:
                sparse_copy(machine.disks.dir / name, work / "disks" / name)
            for mem in snap.memory_files(man):
                os.replace(work / "state" / mem, work / mem)
            man.machine = ""
            snap.write(work, man)
            shutil.rmtree(work / "state")
            try:
                os.rename(work, folder)
            except OSError:      # another machine of this shape saved it first
                shutil.rmtree(work, ignore_errors=True)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return key

    def copy_workspace(self, folder: Path, man: snap.Manifest, dest: Chain) -> None:
        Chain(folder / "disks").copy_to(man.layers, dest)

    def list(self) -> list:
        out = []
        if self.root.exists():
            for d in sorted(self.root.iterdir()):
                if d.name.startswith(".") or not (d / snap.MANIFEST).exists():
                    continue
                try:
                    m = snap.read(d)
                except snap.SnapshotError:
                    continue
                size = sum(f.stat().st_blocks * 512 for f in d.rglob("*") if f.is_file())
                out.append({"key": d.name, "created_at": m.created_at, "vcpus": m.shape.get("vcpus"),
                            "memory_mib": m.shape.get("memory_mib"), "image": m.shape.get("image"),
                            "bytes": size})
        return out

    def remove(self, key: str) -> bool:
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"bad template key {key!r}")
        folder = self.root / key
        if not folder.exists():
            return False
        shutil.rmtree(folder)
        return True
