"""Data volumes on a real store (SQLite and PostgreSQL): names, limits, the roles' lists, the volumes a spawn
records on its agents, and a removal refused while a running VM mounts the volume (the refusal changes
nothing); the image builder's modes; and the hub's routes and CLI as a person meets them."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import stat

import pytest

from agentplaza.cli.commands.volumes import AREA
from agentplaza.commands import agents as ac
from agentplaza.commands import volumes as cmd
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Refusal
from agentplaza.domain.volumes import MAX_PER_ROLE, VOLUMES_ID, check_move, check_name
from agentplaza.events.store import EventStore
from agentplaza.projections.agents import AgentsProjection
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url
from agentplaza.projections.volumes import VolumesProjection, of_agent, roles, volumes
from vmm import volumes as images

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
MiB = 1 << 20


@pytest.fixture
def plaza(folders, database_url):
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    cmds = Commands(store, lambda: T0)
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    rms = ReadModels(engine, store, [VolumesProjection(), AgentsProjection()])
    rms.setup()
    yield cmds, rms
    store.close()
    engine.dispose()


def owner(cmds):
    return cmds.context("owner")


def make(cmds, name, source="/srv/corpus", size=16 * MiB):
    return cmd.create(cmds, owner(cmds), name, source, f"{name}-0123abcd.ext4", size).value


def refused(code, fn, *args):
    with pytest.raises(Refusal) as e:
        fn(*args)
    assert e.value.code == code, e.value.message
    return e.value


def log_length(cmds):
    return len(list(cmds.store.read(0, 100000)))


# -- names and limits -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "corpus", "model-cache-2", "0", "a" * 20, "9-"])
def test_a_volume_name_is_1_to_20_of_a_z_0_9_and_dash(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "-corpus", "a" * 21, "Corpus", "cor_pus", "cor pus", "corpus\n", "ü", "../x", 7])
def test_a_bad_volume_name_is_refused(name):
    refused("invalid_volume_name", check_name, name)


def test_create_keeps_the_source_absolute_and_refuses_what_is_wrong_changing_nothing(plaza):
    cmds, rms = plaza
    made = make(cmds, "corpus", "/srv/data/../corpus")
    assert made["source"] == "/srv/corpus" and made["size_bytes"] == 16 * MiB
    before = log_length(cmds)
    refused("volume_exists", make, cmds, "corpus")
    refused("invalid_source", make, cmds, "other", "relative/path")
    refused("invalid_source", make, cmds, "other", "/srv/\x00x")
    refused("invalid_volume_name", make, cmds, "-other")
    refused("owner_only", cmd.create, cmds, cmds.context("agent:3"), "x", "/srv", "x-0123abcd.ext4", MiB)
    assert log_length(cmds) == before
    rms.catch_up()
    assert [v["name"] for v in volumes(rms)] == ["corpus"]


# -- the roles' lists ---------------------------------------------------------------------------------------
def test_a_role_takes_at_most_4_volumes_each_one_that_exists_and_mount_replaces_the_list(plaza):
    cmds, rms = plaza
    for n in ("a", "b", "c", "d", "e"):
        make(cmds, n)
    before = log_length(cmds)
    refused("too_many_volumes", cmd.mount, cmds, owner(cmds), "researcher", ["a", "b", "c", "d", "e"])
    refused("unknown_volume", cmd.mount, cmds, owner(cmds), "researcher", ["a", "nope"])
    refused("invalid_volume_list", cmd.mount, cmds, owner(cmds), "researcher", ["a", "a"])
    refused("invalid_volume_list", cmd.mount, cmds, owner(cmds), "researcher", [])
    refused("unknown_role", cmd.mount, cmds, owner(cmds), "pirate", ["a"])
    refused("no_change", cmd.unmount, cmds, owner(cmds), "researcher")
    assert log_length(cmds) == before
    assert cmd.mount(cmds, owner(cmds), "researcher", ["a", "b", "c", "d"]).value == ["a", "b", "c", "d"]
    assert len(["a", "b", "c", "d"]) == MAX_PER_ROLE
    cmd.mount(cmds, owner(cmds), "researcher", ["e", "a"])   # replaces, in the order given
    cmd.mount(cmds, owner(cmds), "builder", ["b"])
    rms.catch_up()
    lists = {r["role"]: r["volumes"] for r in roles(rms)}
    assert lists["researcher"] == ["e", "a"] and lists["builder"] == ["b"] and lists["reviewer"] == []
    assert len(lists) == 17   # every role of the catalogue, with its list or none
    cmd.unmount(cmds, owner(cmds), "researcher")
    rms.catch_up()
    assert {r["role"]: r["volumes"] for r in roles(rms)}["researcher"] == []


# -- spawns ---------------------------------------------------------------------------------------------------
def test_the_list_applies_to_agents_spawned_afterwards_and_running_ones_keep_theirs(plaza):
    cmds, rms = plaza
    make(cmds, "corpus")
    make(cmds, "models")
    (before,) = ac.spawn(cmds, owner(cmds), "researcher").value
    cmd.mount(cmds, owner(cmds), "researcher", ["models", "corpus"])
    (after,) = ac.spawn(cmds, owner(cmds), "researcher").value
    (builder,) = ac.spawn(cmds, owner(cmds), "builder").value
    cmd.mount(cmds, owner(cmds), "researcher", ["corpus"])   # later: the agent keeps what it was spawned with
    assert ac.agent(cmds, before).volumes == []
    assert ac.agent(cmds, after).volumes == ["models", "corpus"]
    assert ac.agent(cmds, builder).volumes == []
    rms.catch_up()
    assert [m["name"] for m in of_agent(rms, ac.agent(cmds, after).id.hex)] == ["models", "corpus"]
    assert all(m["image"].endswith(".ext4") for m in of_agent(rms, ac.agent(cmds, after).id.hex))
    assert {v["name"]: v["mounted_by"] for v in volumes(rms)} == {"corpus": [after], "models": [after]}


def test_a_fork_mounts_its_sources_volumes(plaza):
    cmds, rms = plaza
    make(cmds, "corpus")
    cmd.mount(cmds, owner(cmds), "researcher", ["corpus"])
    (src,) = ac.spawn(cmds, owner(cmds), "researcher").value
    cmd.unmount(cmds, owner(cmds), "researcher")
    forks = ac.fork(cmds, owner(cmds), src, 2, "fork-1").value
    assert [ac.agent(cmds, f).volumes for f in forks] == [["corpus"], ["corpus"]]
    rms.catch_up()
    assert volumes(rms)[0]["mounted_by"] == sorted([src, *forks])


# -- removal --------------------------------------------------------------------------------------------------
def test_rm_is_refused_while_a_running_vm_mounts_it_and_the_refusal_changes_nothing(plaza):
    cmds, rms = plaza
    make(cmds, "corpus")
    make(cmds, "spare")
    cmd.mount(cmds, owner(cmds), "researcher", ["corpus", "spare"])
    a, b = ac.spawn(cmds, owner(cmds), "researcher", 2).value
    ac.connected(cmds, cmds.context("node:n0"), a)
    before = log_length(cmds)
    vols_version = cmds.store.get(VOLUMES_ID).version
    e = refused("volume_in_use", cmd.remove, cmds, owner(cmds), "corpus")
    assert str(a) in e.message and str(b) in e.message
    assert log_length(cmds) == before and cmds.store.get(VOLUMES_ID).version == vols_version
    ac.stop(cmds, owner(cmds), a)
    refused("volume_in_use", cmd.remove, cmds, owner(cmds), "corpus")   # b still runs
    ac.delete(cmds, owner(cmds), b)
    assert cmd.remove(cmds, owner(cmds), "corpus").value == "corpus-0123abcd.ext4"
    refused("unknown_volume", cmd.remove, cmds, owner(cmds), "corpus")
    rms.catch_up()
    assert [v["name"] for v in volumes(rms)] == ["spare"]
    assert {r["role"]: r["volumes"] for r in roles(rms)}["researcher"] == ["spare"]   # its lists lose it
    (c,) = ac.spawn(cmds, owner(cmds), "researcher").value
    assert ac.agent(cmds, c).volumes == ["spare"]


def test_an_asleep_vm_still_mounts_its_volumes(plaza):
    cmds, rms = plaza
    make(cmds, "corpus")
    cmd.mount(cmds, owner(cmds), "builder", ["corpus"])
    (a,) = ac.spawn(cmds, owner(cmds), "builder").value
    ac.connected(cmds, cmds.context("node:n0"), a)
    ac.sleep(cmds, owner(cmds), a)
    assert ac.agent(cmds, a).status == "asleep"
    refused("volume_in_use", cmd.remove, cmds, owner(cmds), "corpus")
    ac.retire(cmds, owner(cmds), a)
    cmd.remove(cmds, owner(cmds), "corpus")


def test_a_fork_restart_or_wipe_of_an_agent_whose_volume_was_removed_is_refused(plaza):
    cmds, rms = plaza
    make(cmds, "corpus")
    cmd.mount(cmds, owner(cmds), "builder", ["corpus"])
    (a,) = ac.spawn(cmds, owner(cmds), "builder").value
    ac.stop(cmds, owner(cmds), a)
    cmd.remove(cmds, owner(cmds), "corpus")
    before = log_length(cmds)
    refused("unknown_volume", ac.fork, cmds, owner(cmds), a, 1, "fork-1")
    e = refused("unknown_volume", ac.restart, cmds, owner(cmds), a)   # its VM cannot start again without it
    assert "corpus was removed" in e.message
    refused("unknown_volume", ac.wipe, cmds, owner(cmds), a)
    assert log_length(cmds) == before


def test_a_move_needs_a_volume_of_the_same_name_on_the_target():
    check_move(["corpus", "models"], {"models", "corpus", "other"}, "n1")
    e = refused("volume_missing_on_target", check_move, ["corpus", "models"], ["corpus"], "n1")
    assert "a move needs a volume of the same name on the target" in e.message and "models" in e.message


# -- the image ------------------------------------------------------------------------------------------------
def test_an_image_is_built_from_a_folder_owner_only_and_a_move_check_reads_the_folder(tmp_path):
    src = tmp_path / "corpus"
    (src / "deep").mkdir(parents=True)
    (src / "hello.txt").write_text("shared data\n")
    (src / "deep" / "big.bin").write_bytes(os.urandom(3 * MiB))
    folder = tmp_path / "volumes"
    old = os.umask(0o022)
    try:
        image, size = images.build(src, folder, "corpus")
    finally:
        os.umask(old)
    p = folder / image
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert p.stat().st_size == size >= 3 * MiB
    assert list(folder.iterdir()) == [p]
    import subprocess
    out = subprocess.run(["debugfs", "-R", "cat /hello.txt", str(p)], capture_output=True, text=True).stdout
    assert out == "shared data\n"
    assert images.held(folder) == {"corpus": image}
    assert images.missing(folder, ["corpus", "models"]) == ["models"]
    for bad in ("../x-0123abcd.ext4", "corpus", "x/y-0123abcd.ext4"):
        with pytest.raises(images.VolumeError):
            images.image_path(folder, bad)
    with pytest.raises(images.VolumeError, match="not a folder"):
        images.build(tmp_path / "nothing", folder, "x")
    assert images.remove(folder, image) and not p.exists()


# -- the hub and the CLI ----------------------------------------------------------------------------------------
def test_the_cli_makes_the_source_absolute_before_it_is_sent(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = AREA.action("create").body(argparse.Namespace(name="corpus", source="data/set"))
    assert body == {"name": "corpus", "source": str(tmp_path / "data" / "set")}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_volumes_over_the_cli_and_the_api(folders, database_url, tmp_path):
    from support.hubproc import HubProcess, cli

    src = tmp_path / "corpus"
    src.mkdir()
    (src / "hello.txt").write_text("shared data\n")
    h = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        made = cli(h, "volumes", "create", "corpus", str(src))
        assert made.returncode == 0, made.stderr
        assert "volume corpus made" in made.stdout
        ls = json.loads(cli(h, "--json", "volumes", "ls").stdout)
        (v,) = ls["volumes"]
        assert (v["name"], v["source"], v["mounted_by"]) == ("corpus", str(src), []) and v["size_bytes"] > 0
        table = cli(h, "volumes", "ls").stdout
        assert "corpus" in table and "SOURCE" in table and "MiB" in table
        vols = folders.data / "volumes"
        (img,) = list(vols.iterdir())
        assert stat.S_IMODE(img.stat().st_mode) == 0o600 and stat.S_IMODE(vols.stat().st_mode) == 0o700

        again = cli(h, "volumes", "create", "corpus", str(src))
        assert again.returncode == 1 and "volume_exists" in again.stderr
        inside = cli(h, "volumes", "create", "state", str(folders.state))   # the plaza's own files: never
        assert inside.returncode == 1 and "invalid_source" in inside.stderr
        (tmp_path / "sneaky").symlink_to(folders.state)                      # nor through a link
        linked = cli(h, "volumes", "create", "sneaky", str(tmp_path / "sneaky"))
        assert linked.returncode == 1 and "invalid_source" in linked.stderr
        above = cli(h, "volumes", "create", "above", str(folders.state.parent))   # nor a folder that holds them
        assert above.returncode == 1 and "invalid_source" in above.stderr
        proc = cli(h, "volumes", "create", "proc", "/proc/self")
        assert proc.returncode == 1 and "invalid_source" in proc.stderr
        nothing = cli(h, "volumes", "create", "nothing", str(tmp_path / "nothing"))
        assert nothing.returncode == 1 and "invalid_source" in nothing.stderr
        bad = cli(h, "volumes", "create", "-x", str(src))
        assert bad.returncode != 0
        assert list(vols.iterdir()) == [img]   # every refusal left nothing behind

        with h.client() as c:
            assert c.post("/v1/volumes", json={"name": "Bad", "source": str(src)}).json()["error"]["code"] == \
                "invalid_volume_name"
            assert c.post("/v1/volumes", json={"name": "x", "source": "rel"}).json()["error"]["code"] == \
                "invalid_source"
            five = c.put("/v1/volumes/roles/researcher", json={"volumes": ["a", "b", "c", "d", "e"]})
            assert five.status_code == 422 and five.json()["error"]["code"] == "too_many_volumes"

        mounted = cli(h, "volumes", "mount", "researcher", "corpus")
        assert mounted.returncode == 0 and "researcher mounts corpus" in mounted.stdout, mounted.stderr
        rl = json.loads(cli(h, "--json", "volumes", "roles").stdout)["roles"]
        assert {r["role"]: r["volumes"] for r in rl}["researcher"] == ["corpus"]
        assert cli(h, "volumes", "unmount", "researcher").returncode == 0
        assert cli(h, "volumes", "unmount", "researcher").returncode == 1

        unasked = cli(h, "volumes", "rm", "corpus")   # no terminal: the question is a no
        assert unasked.returncode == 1 and "not_confirmed" in unasked.stderr and img.exists()
        gone = cli(h, "volumes", "rm", "corpus", "--yes")
        assert gone.returncode == 0 and "volume corpus removed" in gone.stdout
        assert not img.exists()
        assert json.loads(cli(h, "--json", "volumes", "ls").stdout) == {"volumes": []}
    finally:
        h.stop()
