"""apid refuses to start on folders or files other users may read or write, and says how to fix it."""

from __future__ import annotations

import stat
import threading

import pytest
from support.hubproc import HubProcess

from agentplaza.permissions import Exposed, check_private, write_private_bytes

NO_NODE = ("--node", "off")


def refused(folders) -> str:
    with pytest.raises(RuntimeError) as e:
        HubProcess(folders, args=NO_NODE).start()
    output = str(e.value).removeprefix("apid exited: ")
    lines = [x for x in output.splitlines() if x.startswith("apid: cannot start: ")]
    assert len(lines) == 1, str(e.value)
    return lines[0]


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_file_the_hub_makes_is_private_and_a_private_plaza_starts_again(folders):
    HubProcess(folders, args=NO_NODE).start().stop()
    for folder in (folders.state, folders.config, folders.data):
        assert mode(folder) == 0o700
    made = [p for folder in (folders.state, folders.config) for p in folder.iterdir() if p.is_file()]
    assert {"owner-token", "hub.json", "plaza.sqlite", "read-models.sqlite", "chain-anchors.jsonl"} <= {p.name for p in made}
    assert (folders.config / "chain-anchor.key").exists()
    for p in made:
        if p.name != "noded.log":
            assert mode(p) == 0o600, p
    HubProcess(folders, args=NO_NODE).start().stop()


def test_a_state_folder_others_can_read_stops_the_start_with_the_fix(folders):
    HubProcess(folders, args=NO_NODE).start().stop()
    folders.state.chmod(0o755)
    line = refused(folders)
    assert f"the state folder {folders.state} is readable by other users (mode 0755)" in line
    assert line.endswith(f"fix it with: chmod 700 {folders.state}")
    folders.state.chmod(0o700)
    HubProcess(folders, args=NO_NODE).start().stop()


def test_an_owner_token_others_can_read_stops_the_start_with_the_fix(folders):
    HubProcess(folders, args=NO_NODE).start().stop()
    token = folders.state / "owner-token"
    token.chmod(0o644)
    line = refused(folders)
    assert f"the owner token {token} is readable by other users (mode 0644)" in line
    assert line.endswith(f"chmod 600 {token}")
    token.chmod(0o600)
    HubProcess(folders, args=NO_NODE).start().stop()


def test_a_world_writable_hub_document_stops_the_start_with_the_fix(folders):
    HubProcess(folders, args=NO_NODE).start().stop()
    record = folders.state / "hub.json"
    record.chmod(0o602)
    line = refused(folders)
    assert f"the hub document {record} is writable by other users (mode 0602)" in line
    assert line.endswith(f"chmod 600 {record}")


def test_a_config_folder_and_the_anchor_key_are_held_to_the_same_rule(folders):
    HubProcess(folders, args=NO_NODE).start().stop()
    key = folders.config / "chain-anchor.key"
    key.chmod(0o640)
    assert f"chmod 600 {key}" in refused(folders)
    key.chmod(0o600)
    folders.config.chmod(0o770)
    assert f"chmod 700 {folders.config}" in refused(folders)


def test_the_rule_passes_missing_files_and_names_the_first_exposed_one(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    check_private([(folder, "state folder")], [(folder / "absent", "owner token")])
    (folder / "a").write_text("x")
    (folder / "a").chmod(0o666)
    with pytest.raises(Exposed, match="readable and writable by other users"):
        check_private([(folder, "state folder")], [(folder / "a", "owner token")])


def test_a_private_file_rewritten_while_read_is_never_seen_half_written(tmp_path):
    """The node's status file is read (by ``node status`` and the tests) while the uplink rewrites it:
    a reader sees the old contents or the new, never an empty or cut file, and it stays 0600."""
    path = tmp_path / "status.json"
    versions = [(b'{"n": %d, "pad": "%s"}' % (i, b"x" * 4000)) for i in range(200)]
    write_private_bytes(path, versions[0])
    seen: set[bytes] = set()
    done = threading.Event()

    def read():
        while not done.is_set():
            seen.add(path.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    for v in versions:
        write_private_bytes(path, v)
    done.set()
    reader.join()
    assert seen <= set(versions)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary file left behind
