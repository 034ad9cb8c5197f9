"""How a QEMU machine's jail is laid out: what it binds, as whom QEMU runs, its argv inside.
``QemuMachine`` (``vmm.qemu``) takes this as a mixin; ``vmm.spare`` lays out a spare QEMU's the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import jail as jailmod

#: The descriptor numbers a jailed QEMU gets its volumes' images on (one each, read-only).
VOLUME_FD_FIRST = 100


class JailLayout:
    """The jail of a ``QemuMachine``."""

    def _spawn_jailed(self, host_paths: dict, incoming: bool = False) -> None:
        uid = self._uid()
        os.chown(self.run_dir, uid, uid)
        (self.dir / "jail").mkdir(exist_ok=True)
        argv, spec = self._jail_plan(host_paths, uid, incoming)
        spare, self._spare = self._spare, None
        self.proc = jailmod.spawn(argv, spec, spare=spare, **jailmod.HELPER_OUTPUT)
        self.jailed = True

    def _jail_plan(self, host_paths: dict, uid: int, incoming: bool, spare: bool = False,
                   jroot: Path | None = None) -> tuple:
        """QEMU's argv inside its jail and the jail's spec. ``spare``: a QEMU started ahead (``vmm.spare``):
        its own disks folder (``host_paths["disks"]``), its workspace's nodes named, no cgroup yet."""
        inner = {"kernel": "/vm/vmlinux", "initrd": "/vm/initrd", "rootfs": "/vm/rootfs.ext4",
                 "workspace": f"/vm/disks/{Path(host_paths['workspace']).name}", "run": "/vm/run",
                 "ws_nodes": spare}
        ro = {inner[k]: host_paths[k] for k in ("kernel", "initrd", "rootfs")}
        # A volume's image is the hub's, 0600 in its 0700 folder, shared by every VM that mounts it: the
        # helper (root) opens it read-only and QEMU gets the descriptor (-add-fd), never the file's path.
        fds = {}
        for i in range(len(self.spec.volumes)):
            inner[f"vol{i}"] = f"/dev/fdset/{i + 1}"
            inner[f"vol{i}_fd"] = VOLUME_FD_FIRST + i
            fds[str(VOLUME_FD_FIRST + i)] = host_paths[f"vol{i}"]
        for jp, hp in jailmod.qemu_files(self.platform.qemu, self.platform.accel).items():
            ro[jp] = hp
        rw = {"/vm/disks": host_paths.get("disks", str(self.disks.dir)), inner["run"]: host_paths["run"]}
        if "ram" in host_paths:   # the RAM file's own folder, nothing else of the tmpfs
            rw["/vm/ram"] = str(Path(host_paths["ram"]).parent)
            inner["ram"] = "/vm/ram/ram"
        devices = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
        if self.platform.accel == "kvm":
            devices += ("/dev/kvm",)
        # The disks folder is bound whole (so the qcow2 chain resolves and a live
        # snapshot can open its new layer); frozen layers are root's and read-only,
        # so the VM's uid can write only its top layer.
        spec = jailmod.JailSpec(root=str(jroot or self.dir / "jail"), uid=uid, ro=ro, rw=rw, fds=fds,
                                devices=devices, cgroups=tuple(map(str, self.cgroup.folders))
                                if self.cgroup and not spare else ())
        argv = self.command(inner, incoming)
        argv[0] = os.path.realpath(self.platform.qemu)
        return argv, spec
