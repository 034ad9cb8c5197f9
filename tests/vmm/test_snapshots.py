"""Snapshots without a VM: manifests and their checks, workspace layers, moves,
the crash-recovery policy and template keys. Needs qemu-img/qemu-io (qemu-utils)."""
import json
import os
import select
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.source import parsed

from vmm import recovery
from vmm import snapshot as snap
from vmm.backend import MachineBusy, MachineSpec, VMError
from vmm.disks import BASE, Chain, DiskError, backing_of, sparse_copy
from vmm.move import Export, Import, MoveError, Piece, copy
from vmm.probe import Facts, decide
from vmm.qemu import QemuMachine
from vmm.templates import key_of

SHAPE = {"vcpus": 1, "memory_mib": 256, "workspace_mib": 64, "image": "img1",
         "artifacts": {"vmlinux": "a", "initrd.cpio.gz": "b", "rootfs.ext4": "c"},
         "cmdline": "console=ttyS0", "vmm_version": snap.VMM_VERSION, "accel": "tcg",
         "channel": "virtio-serial"}


def manifest(**kw):
    d = dict(kind="checkpoint", name="snap-1", backend="qemu-microvm", shape=dict(SHAPE),
             volumes=["corpus"], layers=[BASE, "L0001.qcow2"], created_at=1000.0)
    d.update(kw)
    return snap.Manifest(**d)


# -- manifests -------------------------------------------------------------------
def test_manifest_round_trip_and_version_fields(tmp_path):
    m = manifest(label="before upgrade")
    snap.write(tmp_path / "s", m)
    raw = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert raw["format"] == snap.FORMAT_VERSION and raw["backend"] == "qemu-microvm"
    back = snap.read(tmp_path / "s")
    assert back == m
    assert back.info()["label"] == "before upgrade"


def test_manifest_without_format_or_garbage_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "manifest.json").write_text('{"kind": "sleep"}')
    with pytest.raises(snap.SnapshotError, match="format version"):
        snap.read(tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text("{nope")
    with pytest.raises(snap.SnapshotError):
        snap.read(tmp_path / "b")
    with pytest.raises(snap.SnapshotError, match="no snapshot"):
        snap.read(tmp_path / "c")
    with pytest.raises(ValueError):
        snap.write(tmp_path / "d", manifest(kind="weird"))


def test_restore_checks_format_backend_volumes_and_shape():
    ok = manifest()
    snap.check_restorable(ok, "qemu-microvm", SHAPE, ["corpus"])
    with pytest.raises(snap.SnapshotError, match="format version 2"):
        snap.check_restorable(manifest(format=2), "qemu-microvm", SHAPE, ["corpus"])
    with pytest.raises(snap.SnapshotError, match="firecracker"):
        snap.check_restorable(manifest(backend="firecracker"), "qemu-microvm", SHAPE, ["corpus"])
    for vols in ([], ["corpus", "other"], ["other"]):
        with pytest.raises(snap.SnapshotError, match="volumes"):
            snap.check_restorable(ok, "qemu-microvm", SHAPE, vols)
    two = manifest(volumes=["a", "b"])
    with pytest.raises(snap.SnapshotError, match="same order"):
        snap.check_restorable(two, "qemu-microvm", SHAPE, ["b", "a"])
    for k, v in (("memory_mib", 512), ("vcpus", 2), ("image", "img2"), ("vmm_version", "0")):
        with pytest.raises(snap.SnapshotError, match=k):
            snap.check_restorable(ok, "qemu-microvm", dict(SHAPE, **{k: v}), ["corpus"])
    # a disk-only checkpoint boots cold: the memory shape does not matter
    snap.check_restorable(manifest(memory=False), "qemu-microvm", dict(SHAPE, memory_mib=512), ["corpus"])
    assert issubclass(snap.SnapshotError, VMError)
    assert snap.memory_name(manifest()) == "memory.zst"
    assert snap.memory_name(manifest(compression="none")) == "memory.raw"
    with pytest.raises(snap.SnapshotError, match="compression"):
        snap.memory_name(manifest(compression="lzma"))


# -- workspace layers -----------------------------------------------------------------
def raw_base(path: Path, size_mib: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size_mib << 20)
        f.seek(0)
        f.write(b"B" * 65536)


def qio(path: Path, cmd: str, fmt: str = "qcow2") -> str:
    r = subprocess.run(["qemu-io", "-f", fmt, "-c", cmd, str(path)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    return r.stdout


def read_at(chain: Chain, layers, off: int, n: int, tmp: Path) -> bytes:
    out = tmp / "flat.raw"
    chain.flatten(layers, out)
    with open(out, "rb") as f:
        f.seek(off)
        return f.read(n)


def test_layers_freeze_below_and_never_change_a_frozen_file(tmp_path):
    c = Chain(tmp_path / "disks")
    c.create(raw_base, 8)
    assert c.layers == [BASE, "L0001.qcow2"] and c.top.name == "L0001.qcow2"
    assert backing_of(c.top) == BASE
    assert (os.stat(c.dir / BASE).st_mode & 0o777) == 0o444
    assert (os.stat(c.top).st_mode & 0o777) == 0o600
    qio(c.top, "write -P 0x61 1M 64k")
    frozen = c.layers
    before = (c.dir / "L0001.qcow2").read_bytes()
    base_before = (c.dir / BASE).read_bytes()
    c.push()
    assert c.layers == frozen + ["L0002.qcow2"] and backing_of(c.top) == "L0001.qcow2"
    c.check(c.layers)
    qio(c.top, "write -P 0x62 1M 4k")
    assert (c.dir / "L0001.qcow2").read_bytes() == before          # the snapshot's layer
    assert (c.dir / BASE).read_bytes() == base_before
    assert read_at(c, frozen, 1 << 20, 4, tmp_path) == b"aaaa"
    assert read_at(c, c.layers, 1 << 20, 4, tmp_path) == b"bbbb"
    assert read_at(c, c.layers, 0, 4, tmp_path) == b"BBBB"          # the base shows through
    # a restore of the frozen chain: a new top over it; the abandoned layer goes with gc
    c.push(over=frozen)
    assert c.layers == frozen + ["L0003.qcow2"]
    assert c.gc([frozen]) == ["L0002.qcow2"]
    assert c.gc([]) == []                  # the live chain is always kept
    with pytest.raises(DiskError):
        c.check([BASE, "L0003.qcow2"])


def test_pop_undoes_a_push_and_numbers_never_repeat(tmp_path):
    c = Chain(tmp_path / "disks")
    c.create(raw_base, 4)
    was = c.layers
    c.push()
    c.pop(was)
    assert c.layers == was and not (c.dir / "L0002.qcow2").exists()
    assert c.push().name == "L0003.qcow2"


def test_compact_merges_layers_no_snapshot_uses(tmp_path):
    c = Chain(tmp_path / "disks")
    c.create(raw_base, 8)
    qio(c.top, "write -P 0x31 0 4k")
    kept = c.layers                       # a checkpoint stands on these
    c.push()
    qio(c.top, "write -P 0x32 4k 4k")
    c.push()                              # e.g. a wake after a sleep
    qio(c.top, "write -P 0x33 8k 4k")
    c.push()
    qio(c.top, "write -P 0x34 12k 4k")
    frozen_before = (c.dir / "L0001.qcow2").read_bytes()
    layers = c.compact(kept)
    assert layers == c.layers == kept + ["L0002.qcow2"]
    assert (c.dir / "L0001.qcow2").read_bytes() == frozen_before    # the checkpoint's layer
    assert not (c.dir / "L0003.qcow2").exists() and not (c.dir / "L0004.qcow2").exists()
    assert read_at(c, layers, 0, 16384, tmp_path) == b"1" * 4096 + b"2" * 4096 + b"3" * 4096 + b"4" * 4096
    assert c.compact([]) == [BASE, "L0001.qcow2"]      # nothing kept: down to one layer


def test_copy_to_keeps_holes_and_content(tmp_path):
    c = Chain(tmp_path / "a")
    c.create(raw_base, 64)
    qio(c.top, "write -P 0x7a 10M 128k")
    layers = c.layers
    c.push()
    d = Chain(tmp_path / "b")
    c.copy_to(layers, d)
    d.push()
    assert d.layers == layers + ["L0002.qcow2"]
    assert read_at(d, d.layers, 10 << 20, 3, tmp_path) == b"zzz"
    assert os.stat(d.dir / BASE).st_size == 64 << 20
    assert os.stat(d.dir / BASE).st_blocks * 512 < 1 << 20


def test_sparse_copy(tmp_path):
    src = tmp_path / "s"
    with open(src, "wb") as f:
        f.truncate(32 << 20)
        f.seek(5 << 20)
        f.write(os.urandom(100_000))
        f.seek(20 << 20)
        f.write(bytes(2 << 20))            # written zeros become a hole too
    n = sparse_copy(src, tmp_path / "d")
    assert (tmp_path / "d").read_bytes() == src.read_bytes()
    assert n < 1 << 20 and os.stat(tmp_path / "d").st_blocks * 512 < 2 << 20


# -- moves ---------------------------------------------------------------------------
def sparse_machine(d: Path) -> None:
    (d / "disks").mkdir(parents=True)
    with open(d / "disks" / "base.ext4", "wb") as f:
        f.truncate(256 << 20)
        for off in (0, 7 << 20, (256 << 20) - 1000):
            f.seek(off)
            f.write(os.urandom(1000))
        f.seek(100 << 20)
        f.write(bytes(3 << 20))
    (d / "state.json").write_text('{"sleeping": true}')
    (d / "run").mkdir()
    (d / "run" / "console.log").write_text("not moved")


def test_export_import_round_trip_keeps_sparse_files(tmp_path):
    src = tmp_path / "n1" / "agent-7"
    sparse_machine(src)
    with Export(src) as exp:
        assert [f["path"] for f in exp.files] == ["disks/base.ext4", "state.json"]
        imp = Import(tmp_path / "n2", "agent-7", exp.files)
        fig = copy(exp, imp)
    dst = tmp_path / "n2" / "agent-7"
    assert Path(fig["target"]) == dst
    for rel in ("disks/base.ext4", "state.json"):
        assert (dst / rel).read_bytes() == (src / rel).read_bytes()
    assert os.stat(dst / "disks/base.ext4").st_size == 256 << 20           # apparent size kept
    assert os.stat(dst / "disks/base.ext4").st_blocks * 512 < 4 << 20      # holes kept
    assert fig["bytes_sent"] < fig["apparent_bytes"] / 50                   # far fewer bytes sent
    assert not (dst / "run").exists()
    assert not [p for p in (tmp_path / "n2").iterdir() if p.name.startswith(".import")]


def test_failed_import_leaves_nothing_and_the_source_untouched(tmp_path):
    src = tmp_path / "n1" / "m"
    sparse_machine(src)
    before = (src / "disks/base.ext4").read_bytes()
    exp = Export(src)
    imp = Import(tmp_path / "n2", "m", exp.files)
    for p in exp.pieces():
        imp.write(Piece(p.file, p.offset, bytes(len(p.data) - 1) + b"x"))  # corrupted in transit
    with pytest.raises(MoveError, match="digest"):
        imp.finish(exp.manifest())
    exp.close()
    assert not (tmp_path / "n2" / "m").exists()
    assert list((tmp_path / "n2").iterdir()) == []
    assert (src / "disks/base.ext4").read_bytes() == before
    with pytest.raises(MoveError, match="already exists"):
        Import(tmp_path / "n1", "m", [])
    with pytest.raises(MoveError, match="bad path"):
        Import(tmp_path / "n3", "x", [{"path": "../evil", "size": 1, "mode": 0o600}])


def test_pieces_are_bounded_and_in_order(tmp_path):
    src = tmp_path / "m"
    sparse_machine(src)
    with Export(src) as exp:
        offs = {}
        for p in exp.pieces():
            assert 0 < len(p.data) <= 512 << 10
            assert p.offset > offs.get(p.file, -1)
            offs[p.file] = p.offset


# -- crash recovery policy ------------------------------------------------------------
class S:
    def __init__(self, name, created_at, memory=True, kind="checkpoint"):
        self.name, self.created_at, self.memory, self.kind = name, created_at, memory, kind


def test_recovery_plan():
    now = 100_000.0
    snaps = [S("snap-1", now - 500), S("sleep", now - 100, kind="sleep"), S("snap-2", now - 50, memory=False)]
    p = recovery.plan(now, [], snaps)
    assert p.action == "snapshot" and p.snapshot == "sleep"              # youngest with memory
    assert recovery.plan(now, [], [S("snap-1", now - 90_000)]).action == "cold"   # older than a day
    assert recovery.plan(now, [], [S("snap-2", now - 5, memory=False)]).action == "cold"
    assert recovery.plan(now, [], [S("t", now - 5, kind="template")]).action == "cold"
    assert recovery.plan(now, [now - 10, now - 20], snaps).action == "snapshot"
    p = recovery.plan(now, [now - 10, now - 20, now - 599], snaps)
    assert p.action == "exit" and "3 recoveries" in p.reason
    assert recovery.plan(now, [now - 10, now - 20, now - 601], snaps).action == "snapshot"
    assert recovery.plan(now, [], snaps, enabled=False).action == "exit"
    assert recovery.plan(now, [], snaps, deliberate=True).action == "exit"


# -- templates and the machine without a boot ----------------------------------------
def test_template_key_covers_images_shape_and_version():
    k = key_of(SHAPE, "qemu-microvm")
    assert k == key_of(dict(SHAPE), "qemu-microvm")
    for change in ({"artifacts": dict(SHAPE["artifacts"], vmlinux="z")}, {"memory_mib": 512},
                   {"vcpus": 2}, {"cmdline": "x"}, {"vmm_version": "9"}, {"workspace_mib": 1}):
        assert key_of(dict(SHAPE, **change), "qemu-microvm") != k
    assert key_of(SHAPE, "firecracker") != k
    # the programs parked in a template are part of its key; none parked keeps the plain key
    harness = {"harness": {"argv": ["/usr/bin/python3", "h.py"], "cwd": "/workspace"}}
    assert key_of(SHAPE, "qemu-microvm", {}) == k
    assert key_of(SHAPE, "qemu-microvm", harness) not in (k, key_of(SHAPE, "qemu-microvm", {"other": {"argv": ["x"]}}))


def platform():
    return decide(Facts(frozenset({"kvm", "kvm_pvm"}), frozenset(), True, False, "/usr/bin/qemu-system-x86_64"))


class FakeImage:
    key = "img1"
    kernel, initrd, rootfs = Path("/k"), Path("/i"), Path("/r")
    manifest = {"artifacts": {}}


def test_restore_command_line_and_busy_while_waking(tmp_path):
    m = QemuMachine(MachineSpec("w", image=FakeImage()), tmp_path, platform())
    paths = {"kernel": "/k", "initrd": "/i", "rootfs": "/r", "workspace": "/vm/disks/L0001.qcow2",
             "run": "/run"}
    cold, warm = m.command(paths), m.command(paths, incoming=True)
    assert "-incoming" not in cold and warm[warm.index("-incoming") + 1] == "defer"
    assert "file=/vm/disks/L0001.qcow2,format=qcow2" in " ".join(cold)
    m.phase = "waking"
    with pytest.raises(MachineBusy) as e:
        m.exec(["true"])
    assert e.value.status == 503
    with pytest.raises(MachineBusy):
        _ = m.channel
    assert not m.sleeping and m.checkpoints() == []
    with pytest.raises(VMError):
        m.sleep()                       # not running
    with pytest.raises(VMError, match="not asleep"):
        m.wake()
    with pytest.raises(ValueError):
        m.checkpoint(name="sleep")


class RecordingTemplates:
    """A template store with no template yet: it records what it was asked to save."""
    parked: dict = {}

    def __init__(self):
        self.saved = []

    def find(self, machine):
        return None

    def save(self, machine):
        self.saved.append(machine.spec.name)


def test_only_a_fresh_workspace_becomes_a_template(tmp_path, monkeypatch):
    # a machine booted again over its own workspace (its files, its memory) must never be saved as the
    # template every later machine of its shape restores from
    monkeypatch.setattr("vmm.qemu.make_workspace", raw_base)
    monkeypatch.setattr(QemuMachine, "_launch", lambda self, incoming, wait_ready=True, timeout=60.0: None)
    tpl = RecordingTemplates()
    old = QemuMachine(MachineSpec("old", image=FakeImage(), workspace_mib=4), tmp_path, platform(), templates=tpl)
    old.disks.create(raw_base, 4)
    old.boot()
    assert old.booted_from == "cold" and tpl.saved == []
    new = QemuMachine(MachineSpec("new", image=FakeImage(), workspace_mib=4), tmp_path, platform(), templates=tpl)
    new.boot()
    assert tpl.saved == ["new"]


def test_stopped_machine_gets_disk_only_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setattr("vmm.qemu.make_workspace", raw_base)
    m = QemuMachine(MachineSpec("d", image=FakeImage(), workspace_mib=4), tmp_path, platform())
    m.disks.create(raw_base, 4)
    name = m.checkpoint(label="cold copy")
    [info] = m.checkpoints()
    assert info["name"] == name == "snap-1" and info["memory"] is False
    assert m.disks.layers == [BASE, "L0001.qcow2", "L0002.qcow2"]      # next boot writes a new layer
    assert m.checkpoint() == "snap-2"
    m.delete_checkpoint("snap-1")
    assert m.checkpoint() == "snap-3"                                   # names are never reused
    with pytest.raises(VMError, match="exists"):
        m.checkpoint(name="snap-3")


def test_ram_file_copies_keep_holes_and_drop_zero_runs(tmp_path):
    """A RAM file saved to memory.ram keeps only non-zero 64 KiB runs; restoring it (sendfile over
    its data regions) gives back the same bytes at the same offsets, holes where nothing was."""
    ram = tmp_path / "ram"
    size = 8 << 20
    with open(ram, "wb") as f:
        f.truncate(size)
        f.seek(1 << 20)
        f.write(b"\x01" * 4096)                     # a touched page
        f.seek(3 << 20)
        f.write(bytes(256 << 10))                   # touched, but zeros: not kept
        f.seek((5 << 20) + 100)
        f.write(b"tail")
    saved = tmp_path / snap.MEMORY_MAPPED
    written = snap.copy_ram(ram, saved)
    assert 2 * 4096 <= written <= 2 * snap.RAM_PIECE    # the two non-zero runs, nothing else
    assert saved.stat().st_size == size and saved.stat().st_blocks * 512 <= 4 * snap.RAM_PIECE
    back = tmp_path / "ram2"
    assert snap.copy_ram(saved, back, skip_zeros=False) >= written
    assert back.read_bytes() == ram.read_bytes()
    assert back.stat().st_blocks * 512 < 1 << 20


def test_a_spare_ram_file_with_pages_ready_restores_the_same_bytes_and_keeps_no_other_page(tmp_path):
    """A spare QEMU's RAM file has pages allocated ahead where the last snapshot had data (vmm.spare): a
    restore of another snapshot into it reads back that snapshot's bytes exactly, and every page ready
    beyond the snapshot's goes back (a hole again) before the guest runs."""
    from vmm import spare
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no tmpfs to hold a RAM file")
    mib = 1 << 20
    hint, src = tmp_path / "last.ram", tmp_path / snap.MEMORY_MAPPED
    for path, parts in ((hint, [(1, 3), (6, 7)]), (src, [(2, 4), (8, 9)])):   # MiB ranges with data
        with open(path, "wb") as f:
            f.truncate(16 * mib)
            for a, b in parts:
                f.seek(a * mib)
                f.write(os.urandom((b - a) * mib))
    d = Path(tempfile.mkdtemp(dir=shm))
    try:
        ram = d / "ram"
        with open(ram, "wb") as f:
            f.truncate(16 * mib)
        ready = spare._ready_pages(ram, hint)
        assert ready == [(1 * mib, 3 * mib), (6 * mib, 7 * mib)]
        assert ram.stat().st_blocks * 512 == 3 * mib
        sp = spare.SpareVM(key=(), helper=None, dir=d, ram=ram, uid=0, qmp=None, channel=None,
                           ready_pages=ready)
        snap.copy_ram(src, ram, skip_zeros=False)
        spare.give_back_rest(sp, src)
        assert ram.read_bytes() == src.read_bytes()
        assert ram.stat().st_blocks * 512 == 3 * mib            # the snapshot's 3 MiB, nothing else held
        assert sp.ready_pages == []
    finally:
        shutil.rmtree(d)


def test_memory_files_of_each_form():
    assert snap.memory_files(manifest(compression="mapped")) == ["memory.ram", "devices.bin"]
    assert snap.memory_files(manifest()) == ["memory.zst"]
    assert snap.memory_files(manifest(memory=False)) == []


def test_jail_helper_imports_only_what_it_needs():
    """The helper stays resident beside every VM: nothing beyond os, ctypes, signal, json and sys."""
    import ast

    from vmm import jail
    tree = parsed(jail.HELPER)
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names <= {"__future__", "ctypes", "json", "os", "signal", "sys"}, names


def test_image_profiles_stock_unchanged_tuned_does_the_work_once():
    from vmm.image import build
    stock, tuned = build.recipe("stock"), build.recipe("tuned")
    assert "profile" not in stock and "virtio_balloon" not in stock["modules"]
    assert stock["init"] == build.hashlib.sha256(build.INIT_STOCK.read_bytes()).hexdigest()
    assert "virtio_balloon" in tuned["modules"] and tuned["profile"]["cmdline"] == build.TUNED_CMDLINE
    assert build.recipe_hash(stock) != build.recipe_hash(tuned)
    # the tuned /init is one compiled program: no shell, no busybox in its initramfs
    assert build.INIT.suffix == ".c" and tuned["busybox"] is None and tuned["profile"]["cmdline_tcg"]
    with pytest.raises(ValueError):
        build.recipe("fast")


def test_an_empty_layer_is_the_one_qemu_img_makes(tmp_path):
    from vmm.disks import empty_layer
    c = Chain(tmp_path / "disks")
    c.create(raw_base, 8)
    for below in (BASE, "L0001.qcow2"):     # over the raw base and over a qcow2 layer, twice each
        fmt = "raw" if below == BASE else "qcow2"
        empty_layer(c.dir / "L0008.qcow2", below, fmt, c.dir / below)
        empty_layer(c.dir / "L0009.qcow2", below, fmt, c.dir / below)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", fmt, "-b", below,
                        str(c.dir / "ref.qcow2")], check=True)
        ref = (c.dir / "ref.qcow2").read_bytes()
        assert (c.dir / "L0008.qcow2").read_bytes() == ref == (c.dir / "L0009.qcow2").read_bytes()
        assert backing_of(c.dir / "L0009.qcow2") == below
        for f in ("L0008.qcow2", "L0009.qcow2", "ref.qcow2"):
            os.unlink(c.dir / f)
    with pytest.raises(FileExistsError):     # never over a file that is there
        empty_layer(c.top, BASE, "raw", c.dir / BASE)


#: The harness at the point where it parks, then let go: what it draws must be its own in each copy.
PARK_POINT = r"""
import os, random, sys, tempfile
sys.path.insert(0, "vmm/guest")
import harness, contract
os.environ[contract.PARK_ENV] = "1"
random.seed(7); tempfile._get_candidate_names()
before = (random.getrandbits(64), tempfile._name_sequence)
random.seed(7)
contract.unparked()        # stdin is empty: let go at once
assert contract.PARK_ENV not in os.environ
print(random.getrandbits(64) != before[0], tempfile._name_sequence is None)
"""


def test_a_parked_program_draws_its_randomness_again_when_let_go():
    r = subprocess.run([os.sys.executable, "-S", "-c", PARK_POINT], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, cwd=Path(__file__).parents[2], timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


#: A parked program that channeld handed a ready pipe (its number in PARK_ENV): it closes it, then waits.
READY_POINT = r"""
import sys
sys.path.insert(0, "vmm/guest")
import contract
contract.unparked()
print("let go")
"""


def test_a_parked_program_closes_its_ready_pipe_before_it_waits():
    from vmm.guest import contract
    r, w = os.pipe()
    env = dict(os.environ, **{contract.PARK_ENV: str(w)})
    p = subprocess.Popen([os.sys.executable, "-S", "-c", READY_POINT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         pass_fds=(w,), env=env, cwd=Path(__file__).parents[2])
    os.close(w)
    try:
        assert select.select([r], [], [], 60)[0], "the program never closed its ready pipe"
        assert os.read(r, 1) == b""           # closed by the program itself: it is still running, waiting
        assert p.poll() is None
        p.stdin.close()                       # the unpark
        assert p.stdout.read() == b"let go\n" and p.wait(60) == 0
    finally:
        os.close(r)
        p.kill()


def test_the_harness_holds_no_other_random_state_when_it_parks():
    # what the harness has imported when it parks: nothing with a generator of its own that
    # contract.reseed() does not draw again (OpenSSL's, tempfile's, random's are; others must not load)
    code = "import sys; sys.path.insert(0, 'vmm/guest'); import harness; print(' '.join(sorted(sys.modules)))"
    r = subprocess.run([os.sys.executable, "-S", "-c", code], capture_output=True, text=True,
                       cwd=Path(__file__).parents[2], timeout=60)
    loaded = set(r.stdout.split())
    assert "harness" in loaded and not loaded & {"_ssl", "ssl", "uuid", "_uuid", "multiprocessing", "hmac"}


def test_tuned_image_carries_its_modules_unsigned(tmp_path):
    from vmm.image import build
    body = b"\x7fELF" + bytes(range(200))
    sig = b"S" * 37
    desc = bytes(8) + len(sig).to_bytes(4, "big")
    ko = tmp_path / "m.ko"
    ko.write_bytes(body + sig + desc + build.MODULE_SIG_MAGIC)
    build.unsigned_module(ko)
    assert ko.read_bytes() == body
    build.unsigned_module(ko)   # one without a signature stays as it is
    assert ko.read_bytes() == body
    assert build.recipe("tuned")["profile"]["modules_signed"] is False
    assert "initcall_blacklist=" in build.TUNED_CMDLINE
    # no tracefs files (7,000 inodes and dentries a boot made for nothing: 8.5 MiB of each guest), no blktrace
    blacklist = build.TUNED_CMDLINE.split("initcall_blacklist=")[1].split()[0].split(",")
    assert {"tracer_init_tracefs", "init_blk_tracer"} <= set(blacklist)
