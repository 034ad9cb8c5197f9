"""noded: the node daemon. On the hub's machine it is node n0.

It starts and stops the agents' microVMs through ``vmm``, reports the machine's facts (CPU, memory,
OS, the VM backend and the isolation level the probe found), and carries each guest's channel to the
hub. It listens on a unix socket (mode 0600); the hub connects to it and the two speak the channel
protocol of ``vmm.channel`` over it (the hub is the "host" end):

- streams the hub opens are requests: ``facts``, ``start`` (cid, wipe), ``stop``, ``wipe``,
  ``delete``, ``sleep``, ``wake``, ``list``, ``events`` (a long-lived stream of JSON lines: machine exits,
  crash recoveries, harness exits);
- streams a guest opens (through its channeld) become streams noded opens to the hub, with the
  service name (only the guest contract's ``SERVICES``: ``harness``, ``egress``, ``gateway``) and the
  CID *noded* knows the guest by. Nothing else the guest says about itself crosses.

Each request is answered with one JSON object: the op's fields, or a refusal in the hub's HTTP
error shape, ``{"error": {"code": ..., "message": ...}}`` (``vmm.guest.contract.error``).

The hub starts it for a local plaza (``--exit-with-parent``: its machines stop when the hub goes);
it also runs on its own (``noded``), keeping its machines across hub reconnects.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from vmm import (
    Channel,
    ChannelClosed,
    MachineSpec,
    QemuBackend,
    StreamReset,
    Templates,
    VMError,
    Volume,
    probe,
    trace,
)
from vmm import volumes as volumesmod
from vmm.guest.contract import PARK_ENV, SERVICES, error
from vmm.image.build import Image, ensure_image
from vmm.readiness import blockers

from .console import ConsoleTail
from .nodemoves import Moves

log = logging.getLogger("noded")

#: The services a guest may open towards the hub (the guest contract's); anything else is reset at the node.
GUEST_SERVICES = SERVICES
#: A request for an op the node does not have, and one that failed on the way (the VM's error, say).
UNKNOWN_OP, NODE_FAILED = "unknown_op", "node_failed"
#: Each agent's microVM, unless the hub asks otherwise.
DEFAULT_VCPUS, DEFAULT_MEMORY_MIB = 1, 256
#: The harness, imported (so the tuned image's compiled copy is used) with the standard library only (-S).
HARNESS_ARGV = ["/usr/bin/python3", "-S", "-u", "-B", "-c",
                "import sys; sys.path.insert(0, '/opt/apz'); import harness; sys.exit(harness.main())"]
#: The harness as a warm template holds it, started and waiting (``vmm.templates``: ``parked``).
PARKED_HARNESS = {"argv": HARNESS_ARGV, "cwd": "/workspace", "env": {PARK_ENV: "1"}}
#: The role a sandbox VM is started with (the E2B API's sandboxes run no harness).
SANDBOX_ROLE = "sandbox"
BOOT_TIMEOUT_S = 90.0


#: In a machine's folder: whose machine it is (the hub's agent id and wipe count).
IDENTITY_FILE = "plaza-identity"


def machine_name(cid: int) -> str:
    return f"agent-{cid}"


def machine_facts(platform_info=None) -> dict:
    p = platform_info or probe()
    mem_kib = free_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
            elif line.startswith("MemAvailable:"):  # what placement counts as room (domain.placement)
                free_kib = int(line.split()[1])
    except OSError:
        pass
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    os_name = platform.system()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(), "cpus": os.cpu_count() or 1, "cpu_model": cpu_model,
        "memory_mib": mem_kib // 1024, "memory_free_mib": free_kib // 1024, "os": os_name, "kernel": platform.release(), "arch": platform.machine(),
        "backend": QemuBackend.name, "kvm": p.kvm, "accel": p.accel, "channel": p.channel,
        "isolation": p.isolation, "reasons": list(p.reasons), "qemu": p.qemu is not None,
    }


class Run:
    """One agent's machine on this node, its harness and its guest streams."""

    def __init__(self, node: Node, cid: int, machine) -> None:
        self.node, self.cid, self.machine = node, cid, machine
        self.harness_log = Path(machine.dir) / "harness.log"
        self.stopping = False
        self.sleeping = False
        self.console: ConsoleTail | None = None
        machine.on_exit = self._machine_exited  # a kept-alive machine's guest stopped by itself
        #: A sandbox VM (the E2B API's) runs no harness: the SDK drives it through the ``envd`` op.
        self.sandbox = False

    def start(self) -> None:
        self._tail_console()
        self.machine.boot(timeout=BOOT_TIMEOUT_S)
        trace.mark(self.cid, "node: machine up")
        self._attach()
        trace.mark(self.cid, "node: harness started")

    def _tail_console(self) -> None:
        """The serial console's lines to the hub, for ``agentplaza events --all`` (one tail per run)."""
        path = getattr(self.machine, "console_log", None)
        if path is not None and self.console is None:
            self.console = ConsoleTail(path, lambda text: self.node.event(
                {"cid": self.cid, "event": "console", "text": text})).start(f"console-{self.cid}")

    def end_console(self) -> None:
        if self.console is not None:
            self.console.stop()

    def _attach(self) -> None:
        """Carry the (new) channel's guest streams, run the harness, watch the process."""
        self._tail_console()
        threading.Thread(target=self._accept_loop, daemon=True, name=f"guest-{self.cid}").start()
        parked = "harness" in getattr(self.machine, "parked", ())
        if not self.sandbox:
            self._start_harness()
        elif parked:   # a sandbox restored from an agent's template runs no harness
            self.machine.unpark("harness", end=True).close()
        if not getattr(self.machine, "keep_alive", False):  # a kept-alive machine watches itself
            threading.Thread(target=self._watch, daemon=True, name=f"watch-{self.cid}").start()

    def sleep(self) -> dict:
        self.sleeping = True
        man = self.machine.sleep()
        return {"memory_bytes": getattr(man, "memory_bytes", None)}

    def wake(self) -> dict:
        t0 = time.monotonic()
        self.machine.wake()
        self.sleeping = False
        # The restored guest's old streams ended with the old host; its harness is carried over (held by
        # channeld) and connects again.
        self._attach()
        return {"wake_s": round(time.monotonic() - t0, 3)}

    def rollback(self, name: str) -> dict:
        """Back to a checkpoint (a safety checkpoint first); its harness goes on from there, as after wake."""
        t0 = time.monotonic()
        self.sleeping = True  # the old process ends: not a crash
        try:
            safety = self.machine.restore(name)
        finally:
            self.sleeping = False
        self._attach()
        return {"safety": safety, "restore_s": round(time.monotonic() - t0, 3)}

    def _start_harness(self) -> None:
        # Restored (a template's parked harness, or the one a fork, wake, rollback or recovery carried over,
        # held by channeld): let it go on; it connects again by itself. Otherwise a new one, held in turn.
        if "harness" in getattr(self.machine, "parked", ()):
            st = self.machine.unpark("harness")
        else:
            st = self.machine.channel.open("exec", argv=HARNESS_ARGV, cwd="/workspace", hold="harness")
        st.close()  # no stdin

        def pump() -> None:
            with open(self.harness_log, "ab") as f:
                try:
                    while True:
                        data = st.read()
                        if not data:
                            break
                        f.write(data)
                        f.flush()
                except (ChannelClosed, StreamReset, OSError):
                    pass
            if not self.stopping and not self.sleeping and st.channel is self.machine._channel:
                self.node.event({"cid": self.cid, "event": "harness_exited", "exit": st.close_info.get("exit")})

        threading.Thread(target=pump, daemon=True, name=f"harness-{self.cid}").start()

    def _accept_loop(self) -> None:
        ch = self.machine.channel
        while True:
            try:
                st = ch.accept()
            except (ChannelClosed, OSError, Exception):
                return
            threading.Thread(target=self._carry, args=(st,), daemon=True).start()

    def _carry(self, guest) -> None:
        service = guest.meta.get("service")
        if service not in GUEST_SERVICES:
            guest.reset(f"no service {service!r}")
            return
        hub = self.node.hub
        if hub is None or hub.closed:
            guest.reset("the hub is not connected")
            return
        trace.mark(self.cid, f"node: guest opened {service}")
        try:
            up = hub.open(service, cid=self.cid)  # the CID is the node's word, not the guest's
        except ChannelClosed:
            guest.reset("the hub is not connected")
            return
        splice_streams(guest, up)

    def _machine_exited(self, plan, rc) -> None:
        """The guest shut down, reset or crashed and nobody asked for it: ``vmm.recovery`` decided.
        Recovered (from a snapshot with memory, or cold), the new channel is carried and a harness
        started; left exited, the hub is told why."""
        if self.stopping or self.sleeping:
            return
        if plan.action == "exit":
            log.warning("agent %s: the VM exited (rc %s) and stays exited: %s", self.cid, rc, plan.reason)
            self.node.event({"cid": self.cid, "event": "exited", "exit": rc, "reason": plan.reason})
            self.node.forget(self.cid, self)
            return
        source = self.machine.booted_from or plan.action
        log.warning("agent %s: the VM exited by itself (rc %s); recovered from %s", self.cid, rc, source)
        try:
            self._attach()
        except Exception as e:  # noqa: BLE001 - a recovered guest that cannot run its harness is exited
            log.warning("agent %s: the recovered VM did not take its harness: %s", self.cid, e)
            self.machine.kill()
            self.node.event({"cid": self.cid, "event": "exited", "exit": rc, "reason": f"recovery failed: {e}"})
            self.node.forget(self.cid, self)
            return
        self.node.event({"cid": self.cid, "event": "recovered", "exit": rc, "from": source,
                         "reason": plan.reason, "recoveries": len(self.machine.recoveries)})

    def _watch(self) -> None:
        proc = self.machine.proc
        if proc is None:
            return
        proc.wait()
        if not self.stopping and not self.sleeping and proc is self.machine.proc:
            # Only a machine not kept alive gets here: recovery is off on this node.
            log.warning("agent %s: the VM exited (rc %s) and stays exited: recovery is off", self.cid, proc.returncode)
            self.machine.kill()   # what its process had here goes: its RAM folder, cgroup, channel
            self.node.event({"cid": self.cid, "event": "exited", "exit": proc.returncode,
                             "reason": "recovery is off (noded --no-recover)"})
            self.node.forget(self.cid, self)


def splice_streams(a, b) -> None:
    """Carry bytes both ways between two channel streams until both sides closed."""

    def pump(src, dst) -> None:
        try:
            while True:
                data = src.read()
                if not data:
                    break
                dst.write(data)
            dst.close()
        except (ChannelClosed, StreamReset, OSError, TimeoutError) as e:
            try:
                dst.reset(str(e) or "closed")
            except Exception:
                pass

    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()


class Node:
    machine_name = staticmethod(machine_name)
    default_vcpus, default_memory_mib = DEFAULT_VCPUS, DEFAULT_MEMORY_MIB

    def __init__(self, name: str, vms_dir: Path, image: Image | None = None, images_dir: str | None = None,
                 templates_dir: Path | None = None, recover: bool = True,
                 volumes_dir: Path | None = None) -> None:
        self.name = name
        self.vms_dir = Path(vms_dir)
        # The data volumes' images this node can give its VMs (n0: the hub's own ``<data>/volumes``).
        self.volumes_dir = Path(volumes_dir) if volumes_dir else self.vms_dir.parent / "volumes"
        self.vms_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.vms_dir, 0o711)  # the jailed QEMU (an unprivileged uid) must pass through
        # With a templates folder, a new agent restores from its shape's warm template (the first
        # boots cold and is saved as the template once ready).
        # ``recover``: a guest that stops by itself is started again (``vmm.recovery``); noded --no-recover: not.
        # The template is saved with a harness started and parked in it (imported, waiting to be let go), so
        # an agent restored from it skips Python's start in its guest: the node only unparks it.
        tpl = Templates(templates_dir, parked={"harness": PARKED_HARNESS}) if templates_dir else None
        self.backend = QemuBackend(templates=tpl, recover=recover)
        self._image = image
        self._images_dir = images_dir
        self.runs: dict[int, Run] = {}
        self.lock = threading.Lock()
        self.hub: Channel | None = None
        self._events: list = []
        self._events_cond = threading.Condition()
        self._event_streams: list = []
        self.moves = Moves(self)  # exports and imports of sleeping machines (adapters/kvm/nodemoves.py)

    def image(self) -> Image:
        if self._image is None:
            self._image = ensure_image(self._images_dir)
        return self._image

    # -- events to the hub -----------------------------------------------------------------------
    def event(self, ev: dict) -> None:
        line = (json.dumps(ev) + "\n").encode()
        for st in list(self._event_streams):
            try:
                st.write(line)
            except Exception:
                self._event_streams.remove(st)

    def forget(self, cid: int, run: Run) -> None:
        with self.lock:
            if self.runs.get(cid) is run:
                del self.runs[cid]
        run.end_console()

    # -- requests from the hub -------------------------------------------------------------------
    def handle(self, st) -> None:
        op = st.meta.get("service")
        try:
            if op == "events":
                self._event_streams.append(st)
                return
            if op == "envd":
                self.op_envd(st)
                return
            if op in STREAM_OPS:  # a move's pieces, streamed out of an export or into an import
                getattr(self.moves, op)(st)
                return
            raw = st.read_all(timeout=30)
            meta = dict(st.meta, body=json.loads(raw)) if raw else st.meta
            result = getattr(self, f"op_{op}")(meta) if op in OPS else error(UNKNOWN_OP, f"no op {op!r}")
        except Exception as e:  # noqa: BLE001 - every request gets an answer that says why
            result = error(NODE_FAILED, f"{type(e).__name__}: {e}")
        try:
            st.write(json.dumps(result).encode())
            st.close()
        except (ChannelClosed, StreamReset):
            pass

    def op_envd(self, st) -> None:
        """Carry one E2B SDK request (the stream's bytes, both ways) to a sandbox VM's ``envd`` service.
        Only a machine started as a sandbox is reached: an agent's guest never sees this stream."""
        with self.lock:
            run = self.runs.get(int(st.meta.get("cid") or 0))
        if run is None or not run.sandbox or run.sleeping:
            st.reset("no running sandbox with that cid")
            return
        try:
            guest = run.machine.channel.open("envd")
        except Exception as e:  # noqa: BLE001 - a waking or gone machine: the gateway answers 502
            st.reset(f"{type(e).__name__}: {e}")
            return
        splice_streams(st, guest)

    def op_facts(self, meta: dict) -> dict:
        # ``blockers``: why a microVM cannot boot here now (no QEMU; no guest image and no way to build one).
        return {"node": self.name, "facts": {**machine_facts(self.backend.platform),
                                             "blockers": blockers(self._images_dir)}}

    def op_list(self, meta: dict) -> dict:
        with self.lock:
            return {"machines": [{"cid": c, "running": r.machine.running()} for c, r in self.runs.items()]}

    # -- whose machine this is: the hub's identity of the agent (its id and how often it was wiped) --
    def identity(self, cid: int) -> str | None:
        try:
            return (self.vms_dir / machine_name(cid) / IDENTITY_FILE).read_text().strip() or None
        except FileNotFoundError:
            return None

    def _set_identity(self, cid: int, identity: str | None) -> None:
        if identity is not None:
            d = self.vms_dir / machine_name(cid)
            d.mkdir(parents=True, exist_ok=True)
            (d / IDENTITY_FILE).write_text(identity + "\n")

    def _spec(self, cid: int, meta: dict) -> MachineSpec:
        return MachineSpec(machine_name(cid), vcpus=int(meta.get("vcpus") or DEFAULT_VCPUS),
                           memory_mib=int(meta.get("memory_mib") or DEFAULT_MEMORY_MIB), image=self.image(), cid=cid,
                           volumes=self.volumes_of(meta.get("volumes") or []))

    # -- data volumes ----------------------------------------------------------------------------
    def volumes_of(self, wanted: list) -> tuple:
        """The VM's volumes, in the hub's order: each ``{"name", "image"}`` an image in this node's volumes
        folder (a name that is not an image's, or an image not here, refuses the start and says which)."""
        out = []
        for w in wanted:
            name, image = str(w.get("name") or ""), str(w.get("image") or "")
            if not image:
                raise VMError(f"volume {name} was removed; this VM cannot start without it")
            path = volumesmod.image_path(self.volumes_dir, image)
            if volumesmod.IMAGE_RE.fullmatch(image)["name"] != name:
                raise VMError(f"image {image} is not volume {name}'s")
            if not path.is_file():
                raise VMError(f"volume {name}: no image {image} on node {self.name}")
            out.append(Volume(name, path))
        return tuple(out)

    def check_volumes(self, names: list) -> None:
        """A move needs a volume of the same name on the target: raised on the target node when it lacks one."""
        missing = volumesmod.missing(self.volumes_dir, list(names))
        if missing:
            raise VMError(f"a move needs a volume of the same name on the target: node {self.name} has no "
                          f"{', '.join(missing)}")

    def op_volumes(self, meta: dict) -> dict:
        """The volumes this node holds ({name: image}); with ``check`` (names), refused unless it holds each."""
        if meta.get("check") is not None:
            self.check_volumes(list(meta["check"]))
        return {"volumes": volumesmod.held(self.volumes_dir)}

    def op_start(self, meta: dict) -> dict:
        """Start the machine of ``cid``. ``identity`` (the hub's agent id and wipe count) decides what its
        files are: the same as last time, they are kept (a hub restart loses no workspace); another, they
        are made new (a wipe, or a CID that names a new agent), or, for a fork (``fork_of`` and
        ``checkpoint``), copied from that machine's checkpoint. ``wipe`` makes them new regardless."""
        cid = int(meta["cid"])
        trace.mark(cid, "node: start asked")
        with self.lock:
            old = self.runs.get(cid)
        if old is not None and old.machine.running():
            return {"already": True}
        identity = meta.get("identity")
        spec = self._spec(cid, meta)
        changed = identity is not None and self.identity(cid) != identity
        if changed and meta.get("fork_of") is not None:
            return self._fork(cid, spec, int(meta["fork_of"]), str(meta.get("checkpoint") or ""), identity,
                              meta.get("role") == SANDBOX_ROLE)
        m = self.backend.machine(spec, self.vms_dir, keep_alive=True)
        if meta.get("wipe") or changed:
            m.wipe()
        self._set_identity(cid, identity)
        trace.mark(cid, "node: machine made")
        run = Run(self, cid, m)
        run.sandbox = meta.get("role") == SANDBOX_ROLE
        with self.lock:
            self.runs[cid] = run
        try:
            run.start()
        except BaseException:
            self.forget(cid, run)
            raise
        took = m.boot_seconds or getattr(m, "restore_seconds", None) or 0
        return {"boot_s": round(took, 3), "booted_from": getattr(m, "booted_from", ""),
                "jailed": m.jailed, "notes": m.notes}

    def _fork(self, cid: int, spec: MachineSpec, source: int, checkpoint: str, identity: str,
              sandbox: bool = False) -> dict:
        """A new machine for ``cid`` from a copy of ``source``'s machine at ``checkpoint``: its disk layers
        and its memory, so it resumes where the source was, its harness too (it connects again as this agent)."""
        if not checkpoint:
            raise VMError("a fork names the checkpoint it starts from")
        t0 = time.monotonic()
        with self.lock:
            src_run = self.runs.get(source)
        src = src_run.machine if src_run is not None else \
            self.backend.machine(MachineSpec(machine_name(source), image=self.image()), self.vms_dir)
        if checkpoint not in {c.get("name") for c in src.checkpoints()}:
            raise VMError(f"agent {source} has no checkpoint {checkpoint}")
        stale = self.vms_dir / machine_name(cid)
        if stale.exists():  # the files of an agent that held this CID before
            shutil.rmtree(stale)
        _, (m,) = src.fork([spec], checkpoint, base_dir=self.vms_dir, keep_alive=self.backend.recover,
                           timeout=BOOT_TIMEOUT_S)
        self._set_identity(cid, identity)
        run = Run(self, cid, m)
        run.sandbox = sandbox
        with self.lock:
            self.runs[cid] = run
        try:
            run._attach()
        except BaseException:
            self.forget(cid, run)
            m.kill()
            raise
        return {"boot_s": round(time.monotonic() - t0, 3),
                "booted_from": f"fork of {source} at {checkpoint}", "jailed": m.jailed, "notes": m.notes}

    def op_stop(self, meta: dict) -> dict:
        cid = int(meta["cid"])
        with self.lock:
            run = self.runs.pop(cid, None)
        if run is None:
            return {"running": False}
        run.stopping = True
        run.end_console()
        rc = run.machine.stop(timeout=float(meta.get("timeout") or 20))
        return {"exit": rc}

    def _run(self, meta: dict) -> Run:
        with self.lock:
            run = self.runs.get(int(meta["cid"]))
        if run is None:
            raise VMError(f"no machine for cid {meta['cid']}")
        return run

    def op_sleep(self, meta: dict) -> dict:
        return self._run(meta).sleep()

    def op_wake(self, meta: dict) -> dict:
        return self._run(meta).wake()

    def op_checkpoint(self, meta: dict) -> dict:
        name = self._run(meta).machine.checkpoint(meta.get("name") or None, label=str(meta.get("label") or ""),
                                                  disk_only=bool(meta.get("disk_only")))
        return {"name": name}

    def op_checkpoints(self, meta: dict) -> dict:
        return {"checkpoints": self._run(meta).machine.checkpoints()}

    def op_rollback(self, meta: dict) -> dict:
        return self._run(meta).rollback(str(meta["name"]))

    def op_checkpoint_delete(self, meta: dict) -> dict:
        self._run(meta).machine.delete_checkpoint(str(meta["name"]))
        return {}

    def op_wipe(self, meta: dict) -> dict:
        self.op_stop(meta)
        m = self.backend.machine(MachineSpec(machine_name(int(meta["cid"])), image=self.image()), self.vms_dir)
        m.wipe()
        return {}

    def op_delete(self, meta: dict) -> dict:
        self.op_stop(meta)
        d = self.vms_dir / machine_name(int(meta["cid"]))
        if d.exists():
            shutil.rmtree(d)
        return {}

    def op_templates(self, meta: dict) -> dict:
        t = self.backend.templates
        return {"templates": t.list() if t is not None else [], "enabled": t is not None}

    def op_template_rm(self, meta: dict) -> dict:
        """Remove one warm template; machines already restored from it keep running."""
        t = self.backend.templates
        if t is None:
            return {"removed": False}
        return {"removed": t.remove(str(meta.get("key") or ""))}

    # -- moves (adapters/kvm/nodemoves.py) ------------------------------------------------------------
    def op_export_open(self, meta: dict) -> dict:
        return self.moves.export_open(meta)

    def op_export_manifest(self, meta: dict) -> dict:
        return self.moves.export_manifest(meta)

    def op_export_close(self, meta: dict) -> dict:
        return self.moves.export_close(meta)

    def op_import_open(self, meta: dict) -> dict:
        return self.moves.import_open(meta)

    def op_import_finish(self, meta: dict) -> dict:
        return self.moves.import_finish(meta)

    def op_import_abort(self, meta: dict) -> dict:
        return self.moves.import_abort(meta)

    def adopt(self, cid: int, machine) -> Run:
        """A machine that arrived asleep (a move's import): a run the hub wakes next."""
        run = Run(self, cid, machine)
        run.sleeping = True
        with self.lock:
            self.runs[cid] = run
        return run

    def stop_all(self) -> None:
        with self.lock:
            cids = list(self.runs)
        threads = [threading.Thread(target=self.op_stop, args=({"cid": c, "timeout": 10},)) for c in cids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # -- the hub's connection --------------------------------------------------------------------
    def serve(self, sock_path: Path, stop: threading.Event) -> None:
        sock_path = Path(sock_path)
        sock_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            sock_path.unlink()
        except FileNotFoundError:
            pass
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            srv.bind(str(sock_path))
        finally:
            os.umask(old)
        srv.listen(4)
        srv.settimeout(0.5)
        print(f"noded: node {self.name} listening on {sock_path}", flush=True)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                self.moves.sweep()  # exports and imports past their time are dropped
                continue
            if self.hub is not None and not self.hub.closed:
                self.hub.close()  # the newest hub connection wins
            self._event_streams = []
            self.hub = Channel.over_socket(conn, role="guest", on_open=self.handle).start()
        srv.close()


OPS = ("facts", "list", "start", "stop", "wipe", "delete", "sleep", "wake", "checkpoint", "checkpoints", "rollback",
       "checkpoint_delete", "templates", "template_rm", "volumes",
       "export_open", "export_manifest", "export_close", "import_open", "import_finish", "import_abort")
#: The ops whose stream carries a move's pieces rather than one request and one answer.
STREAM_OPS = ("export_read", "import_write")


def main(argv: list[str] | None = None) -> int:
    from ...config import folders

    f = folders()
    p = argparse.ArgumentParser(prog="noded", description="The AgentPlaza node daemon (node n0 on the hub's machine).")
    p.add_argument("--socket", default=str(f.state / "node.sock"), help="unix socket the hub connects to")
    p.add_argument("--vms", default=str(f.data / "vms"), help="folder of the machines' files")
    p.add_argument("--images", default=os.environ.get("APZ_IMAGE_DIR") or None, help="guest image cache")
    p.add_argument("--name", default="n0")
    p.add_argument("--templates", default=str(f.data / "templates"), help="warm templates folder")
    p.add_argument("--volumes", default=str(f.data / "volumes"), help="data volumes' images folder")
    p.add_argument("--no-templates", action="store_true", help="every new agent boots cold")
    p.add_argument("--no-recover", action="store_true",
                   help="a guest that shuts down, resets or crashes stays exited (no crash recovery)")
    p.add_argument("--exit-with-parent", action="store_true", help="stop every machine when the parent exits")
    p.add_argument("--uplink", metavar="STATE_DIR", default=None,
                   help="a joined node: connect out to the hub this folder's node.json names (no listening socket)")
    args = p.parse_args(argv)
    if args.uplink:
        from ...nodesign import load_joined
        joined = load_joined(Path(args.uplink))
        if joined is None:
            print(f"noded: {args.uplink} holds no node.json: run agentplaza node join CODE first", file=sys.stderr)
            return 2
        args.name = joined["node"]
    logging.basicConfig(level=logging.WARNING, format="noded: %(message)s")
    node = Node(args.name, Path(args.vms), images_dir=args.images,
                templates_dir=None if args.no_templates else Path(args.templates), recover=not args.no_recover,
                volumes_dir=Path(args.volumes))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.exit_with_parent:
        parent = os.getppid()

        def watch_parent() -> None:
            while not stop.is_set():
                if os.getppid() != parent:
                    stop.set()
                time.sleep(0.5)

        threading.Thread(target=watch_parent, daemon=True).start()
    try:
        if args.uplink:
            from .uplink import run as uplink
            print(f"noded: node {args.name} connecting out to {joined['hub']}", flush=True)
            uplink(node, Path(args.uplink), stop)
        else:
            node.serve(Path(args.socket), stop)
    finally:
        node.moves.close_all()
        node.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__: list[Any] = ["GUEST_SERVICES", "Node", "machine_facts", "main"]
