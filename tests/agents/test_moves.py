"""Moves: the records of a move (its refusals, the new placement, the CID kept and never given twice) on
the store, and noded's export and import ops over a real channel (pieces stream out of one node and
into another, zero pieces never sent, an import dropped, exports and imports expiring). The whole move
of a real machine is in test_moves_vm.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path

import pytest
from support.storeplaza import plaza_on_store

from agentplaza.adapters.kvm.link import NodeError, NodeLink
from agentplaza.adapters.kvm.noded import Node
from agentplaza.adapters.kvm.nodemoves import PIECE_HEADER, check_files
from agentplaza.commands import agents as ac
from agentplaza.commands import nodes as node_commands
from agentplaza.commands import plaza as plaza_commands
from agentplaza.domain.agents import LOCAL_CID_FIRST, node_id
from agentplaza.domain.base import Refusal
from agentplaza.joincode import parse
from agentplaza.projections.agents import agents_table, transcript
from agentplaza.runtime import moves
from tests.support.deadline import until
from vmm.channel import StreamReset
from vmm.move import EXPORT_TTL_S, PIECE, Export, MoveError

T0 = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
FIGURES = {"bytes_moved": 52_428_800, "apparent_bytes": 1 << 30, "seconds": 2.5}


@pytest.fixture
def plaza(folders, database_url):
    with plaza_on_store(folders, database_url, T0) as plaza:
        yield plaza


def owner(cmds):
    return cmds.context("owner")


def join(cmds, label="atlas") -> str:
    code = parse(node_commands.make_code(cmds, owner(cmds), label, 15, "https://hub.test:7700", None).value["code"])
    return node_commands.redeem(cmds, cmds.context("hub"), code.id, code.secret, "A" * 43, "10.0.0.9").value.name


def idle_agent(cmds) -> int:
    cid = ac.spawn(cmds, owner(cmds), "builder").value[0]
    ac.connected(cmds, cmds.context("node:n0"), cid)
    return cid


def test_a_move_keeps_the_cid_moves_it_between_the_registries_and_records_the_new_node(plaza):
    cmds, rm = plaza
    n1 = join(cmds)
    cid = idle_agent(cmds)
    ac.check_move(cmds, cid, n1)  # nothing refused, nothing written
    ac.sleep(cmds, owner(cmds), cid)
    assert ac.moved(cmds, owner(cmds), cid, n1, FIGURES).value == "n0"
    n0, dest = cmds.store.get(node_id("n0")), cmds.store.get(node_id(n1))
    assert not n0.holds(cid) and dest.holds(cid) and n0.placed_at(cid) == n1
    assert ac.holder(cmds.store.get, cid).name == n1 and ac.agent(cmds, cid).node == n1
    rm.catch_up()
    assert rm.rows(agents_table, agents_table.c.cid == cid)[0]["node"] == n1
    last = transcript(rm, cid, limit=1, tail=True)[-1]
    assert last["detail"]["action"] == "move" and last["detail"]["bytes_moved"] == FIGURES["bytes_moved"]
    # its CID is not given out again while it is away, and the agent answers commands on its new node
    assert cid not in ac.spawn(cmds, owner(cmds), "builder").value
    ac.wake(cmds, owner(cmds), cid)
    ac.tell(cmds, owner(cmds), cid, "hello over there")
    # back home: n0 holds it again and remembers nothing away
    ac.finish_work(cmds, cmds.context(f"agent:{cid}"), cid, ac.take_work(cmds, cmds.context(f"agent:{cid}"), cid).value["item"], "done")
    ac.sleep(cmds, owner(cmds), cid)
    assert ac.moved(cmds, owner(cmds), cid, "n0", FIGURES).value == n1
    n0 = cmds.store.get(node_id("n0"))
    assert n0.holds(cid) and n0.placed_at(cid) == "n0" and not cmds.store.get(node_id(n1)).holds(cid)


def test_an_agent_deleted_while_away_frees_its_cid_in_its_range(plaza):
    cmds, _ = plaza
    n1 = join(cmds)
    cid = idle_agent(cmds)
    ac.sleep(cmds, owner(cmds), cid)
    ac.moved(cmds, owner(cmds), cid, n1, FIGURES)
    ac.delete(cmds, owner(cmds), cid)
    assert cmds.store.get(node_id("n0")).placed_at(cid) is None
    assert ac.spawn(cmds, owner(cmds), "builder").value == [cid]


@pytest.mark.parametrize("case,code", [
    ("unknown node", "unknown_node"), ("same node", "same_node"), ("working", "agent_busy"),
    ("queued", "agent_busy"), ("offline", "agent_offline"), ("stopped", "agent_stopped"),
    ("retired", "agent_retired"), ("held", "plaza_held"), ("unknown agent", "unknown_agent"),
])
def test_a_move_the_records_refuse_changes_nothing(plaza, case, code):
    cmds, _ = plaza
    n1 = join(cmds)
    cid = idle_agent(cmds) if case != "offline" else ac.spawn(cmds, owner(cmds), "builder").value[0]
    target = {"unknown node": "n9", "same node": "n0"}.get(case, n1)
    if case in ("working", "queued"):
        ac.tell(cmds, owner(cmds), cid, "work")
        if case == "working":
            ac.take_work(cmds, cmds.context(f"agent:{cid}"), cid)
    elif case in ("stopped", "retired"):
        getattr(ac, {"stopped": "stop", "retired": "retire"}[case])(cmds, owner(cmds), cid)
    elif case == "held":
        plaza_commands.stop_all(cmds, cmds.context("owner", "drill"))
    elif case == "unknown agent":
        cid = LOCAL_CID_FIRST + 50
    before = len(list(cmds.store.read()))
    with pytest.raises(Refusal) as r:
        ac.check_move(cmds, cid, target)
    assert r.value.code == code
    assert len(list(cmds.store.read())) == before


def test_a_draining_or_revoked_node_takes_no_moved_agent(plaza):
    """The registry's flags (``nodes drain`` and ``nodes revoke`` set them) refuse a move there, on fresh state."""
    cmds, _ = plaza
    n1 = join(cmds)
    cid = idle_agent(cmds)
    from agentplaza.domain.nodes import REGISTRY_ID

    for flag, code in (("draining", "node_draining"), ("revoked", "node_revoked")):
        unit_get = cmds.store.get

        def get(i, flag=flag, unit_get=unit_get):
            got = unit_get(i)
            if i == REGISTRY_ID:
                got.joined[n1] = {**got.joined[n1], flag: True}
            return got

        class Unit:
            def get(self, i):
                return get(i)

        with pytest.raises(Refusal) as r:
            ac.movable_in(Unit(), cmds.context("owner"), cid, n1)
        assert r.value.code == code


def test_check_files_takes_only_bounded_relative_entries():
    assert check_files([{"path": "disk.qcow2", "size": 5, "mode": 0o644}]) == [{"path": "disk.qcow2", "size": 5, "mode": 0o600}]
    for bad in ([{"path": "", "size": 1}], [{"path": "a", "size": -1}], [{"path": "a\0b", "size": 1}], "x",
                [{"path": "a", "size": 1, "mode": 0o7777}], [{"path": "a" * 600, "size": 1}]):
        with pytest.raises(MoveError):
            check_files(bad)


# -- noded's ops over a real channel -------------------------------------------------------------------
@pytest.fixture
def two_nodes(tmp_path):
    nodes, links, stops = [], [], []
    for name in ("n0", "n1"):
        node = Node(name, tmp_path / name / "vms")
        stop = threading.Event()
        sock = tmp_path / name / "node.sock"
        threading.Thread(target=node.serve, args=(sock, stop), daemon=True).start()
        until("noded's socket", sock.exists)
        nodes.append(node)
        links.append(NodeLink(sock, lambda *a: None).connect())
        stops.append(stop)
    yield nodes, links
    for link, stop in zip(links, stops):
        link.close()
        stop.set()


def sparse_machine(folder: Path, data_mib: int = 3) -> Path:
    """A machine folder with a 1 GiB sparse disk holding ``data_mib`` MiB of data and one zero region."""
    folder.mkdir(parents=True)
    with open(folder / "disk.qcow2", "wb") as f:
        f.truncate(1 << 30)
        f.seek(100 << 20)
        f.write(os.urandom(data_mib << 20))
        f.write(bytes(PIECE * 4))  # written zeros: read, but never sent
    (folder / "plaza-identity").write_text("abc:0\n")
    return folder


def test_pieces_stream_out_of_an_export_and_into_an_import_without_the_zeros(two_nodes, tmp_path):
    (src, dst), (slink, dlink) = two_nodes
    exp = Export(sparse_machine(tmp_path / "agent-7"))
    src.moves.exports["e1"] = {"cid": 7, "export": exp, "read": False}
    opened = dlink.request("import_open", cid=7, body={"files": exp.files})
    reader = slink.stream("export_read", export="e1")
    reader.close()
    writer = dlink.stream("import_write", **{"import": opened["import"]})
    carried = moves.relay(reader, writer)
    answer = json.loads(writer.read_all(30))
    figures = slink.request("export_manifest", export="e1")
    assert answer["bytes_written"] == figures["bytes_sent"] == (3 << 20) + len("abc:0\n")
    assert carried == figures["bytes_sent"] + PIECE_HEADER.size * (3 * 2 + 1)  # 512 KiB pieces, each with its header
    stage = dst.moves.imports[opened["import"]]["import"].stage
    assert (stage / "disk.qcow2").stat().st_blocks * 512 < 8 << 20  # a hole where the source had none of data
    with open(stage / "disk.qcow2", "rb") as f, open(tmp_path / "agent-7" / "disk.qcow2", "rb") as g:
        f.seek(100 << 20)
        g.seek(100 << 20)
        assert f.read(4 << 20) == g.read(3 << 20)  # the written zeros after it were not sent (a hole at finish)
    # an export is read once; a dropped import leaves nothing behind
    again = slink.stream("export_read", export="e1")
    again.close()
    with pytest.raises(StreamReset, match="read once"):
        again.read_all(10)
    assert dlink.request("import_abort", **{"import": opened["import"]}) == {"dropped": True}
    assert not stage.exists() and not any((tmp_path / "n1" / "vms").iterdir())
    assert slink.request("export_close", export="e1") == {"closed": True}


def test_an_import_refuses_a_piece_past_its_file_and_a_cid_the_node_runs(two_nodes, tmp_path):
    (_, dst), (_, dlink) = two_nodes
    opened = dlink.request("import_open", cid=8, body={"files": [{"path": "disk", "size": 10, "mode": 0o600}]})
    w = dlink.stream("import_write", **{"import": opened["import"]})
    w.write(PIECE_HEADER.pack(0, 8, 4) + b"abcd")
    w.close()
    with pytest.raises(StreamReset, match="past the end"):
        w.read_all(30)
    with pytest.raises(NodeError, match="already"):
        dlink.request("import_open", cid=8, body={"files": []})
    with pytest.raises(NodeError, match="expired, finished or was dropped"):
        dlink.request("import_finish", cid=9, body={"manifest": {"files": []}}, **{"import": "nope"})


def test_exports_and_imports_expire(two_nodes, tmp_path):
    (src, dst), (_, dlink) = two_nodes
    exp = Export(sparse_machine(tmp_path / "agent-5", 1))
    src.moves.exports["old"] = {"cid": 5, "export": exp, "read": False}
    opened = dlink.request("import_open", cid=5, body={"files": exp.files})
    imp = dst.moves.imports[opened["import"]]["import"]
    exp.created -= EXPORT_TTL_S + 1
    imp.created -= EXPORT_TTL_S + 1
    until("the sweep", lambda: not src.moves.exports and not dst.moves.imports)  # noded's accept loop sweeps
    assert not imp.stage.exists() and exp._fds == []


def test_agents_move_is_a_route_and_a_cli_action_that_refuse_in_one_line(folders):
    """``POST /v1/agents/{cid}/move`` checks its body; on a hub with no node it is refused ``no_node``
    and ``agents move`` prints that one line on stderr, exit 1 (the moves themselves: test_moves_vm.py)."""
    from support.hubproc import HubProcess, cli

    h = HubProcess(folders)
    h.env.update(APZ_NODE="off")
    h.start(timeout=120)
    try:
        with h.client() as c:
            cid = c.post("/v1/agents", json={"role": "builder"}).json()["agents"][0]["cid"]
            bad = c.post(f"/v1/agents/{cid}/move", json={"node": 1})
            assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
            r = c.post(f"/v1/agents/{cid}/move", json={"node": "n1"})
            assert r.json()["error"]["code"] == "no_node"
            assert c.get(f"/v1/agents/{cid}").json()["agent"]["node"] == "n0"
        r = cli(h, "agents", "move", str(cid), "n1")
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "(no_node)" in r.stderr
    finally:
        h.stop()


def test_a_node_speaks_only_for_the_agents_placed_on_it(folders):
    """A guest stream from node n1 for an agent the records place on n0 (or for a CID never given out)
    is reset at the hub: a node cannot act for an agent that moved away from it or was never there."""
    import socket

    from agentplaza.api.hub import Hub
    from agentplaza.runtime.fleet import AgentRuntime
    from vmm.channel import Channel

    hub = Hub.open(folders)
    try:
        rt = AgentRuntime(hub)
        cid = ac.spawn(hub.commands, hub.commands.context("owner"), "builder").value[0]
        rt.links["n1"] = object()  # n1 is connected (its link is never used here)
        for claimed in (cid, 1050):
            x, y = socket.socketpair()
            guest_end = Channel.over_socket(x, role="guest").start()
            hub_end = Channel.over_socket(y, role="host", on_open=lambda st, c=claimed: rt.on_stream_from(
                "n1", "harness", c, st)).start()
            st = guest_end.open("harness")
            st.write(b'{"op": "hello"}\n')
            with pytest.raises(StreamReset, match="not placed on node n1"):
                st.read(timeout=10)
            guest_end.close()
            hub_end.close()
    finally:
        hub.close()
