"""Data volumes in real microVMs, through the hub: a volume built from a folder (its image 0600 in the hub's
0700 volumes folder), mounted by a role's agents. Two VMs read it at once, a write fails with EROFS and the
image never changes, the mount survives a sleep and a wake, and a fork from a named checkpoint mounts it.
Few boots on purpose: two agents cold, one wake, one fork."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

import pytest
from support.nodeplaza import hub_with_node

from agentplaza.commands import agents as ac
from agentplaza.commands import volumes as cv
from agentplaza.projections.agents import agents_table
from vmm import MachineSpec, Volume
from vmm import snapshot as snap
from vmm import volumes as images

pytestmark = pytest.mark.vm
IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(
    Path(os.environ["APZ_DATA_DIR"]) / "images" if os.environ.get("APZ_DATA_DIR")
    else Path.home() / ".local/share/agentplaza/images")

PROBE = r"""
import errno
print(open('/data/corpus/hello.txt').read().strip())
for how in ('new', 'hello.txt'):
    try:
        open('/data/corpus/' + how, 'a').write('x')
        print('WROTE')
    except OSError as e:
        print(errno.errorcode[e.errno])
print([l.split()[3] for l in open('/proc/mounts') if ' /data/corpus ' in l][0])
"""


@pytest.fixture(scope="module")
def image():
    from vmm.image import ensure_image

    return ensure_image(IMAGES)


@pytest.fixture
def plaza(folders, image, tmp_path):
    with hub_with_node(folders, image, tmp_path) as plaza:
        yield plaza


def wait_for(what, fn, timeout=180.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def kick(hub, rt):
    hub.read_models.catch_up()
    rt.kick()


def roster(hub):
    hub.read_models.catch_up()
    return {r["cid"]: r for r in hub.read_models.rows(agents_table)}


def probe(node, cid):
    rc, out = node.runs[cid].machine.exec(["python3", "-c", PROBE], timeout=120)
    assert rc == 0, out
    lines = out.decode().split()
    return lines[:4], lines[4].split(",")


def test_two_vms_read_one_volume_a_write_fails_it_survives_sleep_and_a_fork_mounts_it(plaza, tmp_path):
    hub, node, rt = plaza
    owner = hub.commands.context("owner")
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "hello.txt").write_text("shared data\n")
    old = os.umask(0o077)   # as the hub builds it
    try:
        file, size = images.build(src, node.volumes_dir, "corpus")
    finally:
        os.umask(old)
    img = node.volumes_dir / file
    assert stat.S_IMODE(img.stat().st_mode) == 0o600 and stat.S_IMODE(node.volumes_dir.stat().st_mode) == 0o700
    before = hashlib.sha256(img.read_bytes()).hexdigest()
    cv.create(hub.commands, owner, "corpus", str(src), file, size)
    cv.mount(hub.commands, owner, "builder", ["corpus"])

    # Two VMs mount it at once and read it; nothing inside can write it.
    a, b = ac.spawn(hub.commands, owner, "builder", 2).value
    kick(hub, rt)
    wait_for("both agents idle", lambda: all(roster(hub).get(c, {}).get("status") == "idle" for c in (a, b)), 240)
    for cid in (a, b):
        assert node.runs[cid].machine.volume_names() == ["corpus"]
        assert node.runs[cid].machine.booted_from == "cold"   # a VM with volumes boots cold
        lines, opts = probe(node, cid)
        assert lines == ["shared", "data", "EROFS", "EROFS"]
        assert "ro" in opts and "nosuid" in opts and "nodev" in opts

    # Sleep and wake: the snapshot records the volume; the woken VM mounts it again.
    ac.sleep(hub.commands, owner, b)
    kick(hub, rt)
    wait_for("b asleep", lambda: b in rt.asleep and not node.runs[b].machine.running())
    m = node.runs[b].machine
    assert snap.read(m.snap_dir / "sleep").volumes == ["corpus"]   # a snapshot records each volume's name
    # A wake with another list (none, another name, or the same twice over) is refused and changes nothing.
    other = Volume("other", img)
    for vols in ((), (other,), (Volume("corpus", img), other)):
        wrong = node.backend.machine(MachineSpec(m.spec.name, image=m.spec.image, cid=b, volumes=vols), node.vms_dir)
        with pytest.raises(snap.SnapshotError, match="volumes"):
            wrong.wake()
        assert wrong.sleeping and not wrong.running()
    ac.wake(hub.commands, owner, b)
    kick(hub, rt)
    wait_for("b awake", lambda: b not in rt.asleep and node.runs[b].machine.running(), 120)
    assert probe(node, b)[0] == ["shared", "data", "EROFS", "EROFS"]

    # A fork from a named checkpoint mounts it too.
    done = rt.fork(a, 1, None, owner)
    (f,) = done["forks"]
    kick(hub, rt)
    wait_for("the fork idle", lambda: roster(hub).get(f, {}).get("status") == "idle", 240)
    assert node.runs[f].machine.volume_names() == ["corpus"]
    assert probe(node, f)[0] == ["shared", "data", "EROFS", "EROFS"]
    assert [c["volumes"] for c in node.runs[a].machine.checkpoints() if c["name"] == done["checkpoint"]] == [["corpus"]]

    # While they run, the volume cannot be removed; the image never changed.
    from agentplaza.domain.base import Refusal
    with pytest.raises(Refusal) as e:
        cv.remove(hub.commands, owner, "corpus")
    assert e.value.code == "volume_in_use"
    rt.close()
    node.stop_all()
    assert hashlib.sha256(img.read_bytes()).hexdigest() == before
