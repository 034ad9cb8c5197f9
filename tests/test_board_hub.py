"""The board and conversations against a real hub, over HTTP and the command line exactly as the guide
writes them: post (from stdin too), list, show, reply, pause on|off with the Paused banner, export with
and without --force; conversations list and show; refusals change nothing; board events on the log."""

from __future__ import annotations

import json

from support.hubproc import cli, ok


def at(c) -> int:
    return c.get("/v1/hub").json()["projections_at"]


def queue_of(c, cid) -> int:
    return ok(c.get(f"/v1/agents/{cid}"))["agent"]["queue"]


def test_the_board_from_the_command_line(hub, tmp_path):
    with hub.client() as c:
        ann, bob = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "builder", "count": 2}))["agents"]]
        ok(c.patch(f"/v1/agents/{ann}", json={"name": "Ann"}))
        r = cli(hub, "board", "post", "@ann the release branch is cut")
        assert r.returncode == 0 and r.stdout.strip() == f"posted p1; delivered to {ann}", r.stderr
        assert (queue_of(c, ann), queue_of(c, bob)) == (1, 0)
        r = cli(hub, "board", "post", "--project", "rel-9", "-", stdin="Notes for @builder\nfrom stdin\n")
        assert r.returncode == 0 and f"delivered to {ann}, {bob}" in r.stdout, r.stderr
        r = cli(hub, "board", "reply", "p1", "--text", "-", stdin="Thanks @all")
        assert r.returncode == 0 and "(reply 1)" in r.stdout and f"{ann}, {bob}" in r.stdout, r.stderr
        listed = cli(hub, "board", "list")
        assert listed.returncode == 0 and "p1" in listed.stdout and "p2" in listed.stdout
        assert "Paused" not in listed.stdout
        shown = cli(hub, "board", "show", "p1")
        assert "the release branch is cut" in shown.stdout and "-- reply 1 by owner" in shown.stdout
        assert "Thanks @all" in shown.stdout
        project = ok(c.get("/v1/board", params={"project": "rel-9"}))
        assert [p["id"] for p in project["posts"]] == ["p2"] and project["paused"] is False

        # pause on: posts are kept, mentions wait; off: delivered, once
        assert cli(hub, "board", "pause", "on").stdout.strip() == "deliveries paused for the whole board"
        assert cli(hub, "board", "list").stdout.startswith("Paused")
        r = cli(hub, "board", "post", "@ann standup moved")
        assert "deliveries are paused" in r.stdout and queue_of(c, ann) == 3
        again = cli(hub, "board", "pause", "on")
        assert again.returncode == 1 and "(no_change)" in again.stderr
        r = cli(hub, "board", "pause", "off")
        assert r.stdout.strip() == "deliveries resumed for the whole board; 1 waiting mention(s) delivered"
        assert queue_of(c, ann) == 4
        assert ok(c.get("/v1/board/p3"))["held"] is False

        # export: standard output, a file, refused over an existing file unless --force
        md = cli(hub, "board", "export")
        assert md.returncode == 0 and md.stdout.startswith("# The board") and "## p1 by owner" in md.stdout
        out = tmp_path / "board.md"
        assert cli(hub, "board", "export", "-o", str(out)).returncode == 0
        assert out.read_text() == md.stdout and (out.stat().st_mode & 0o777) == 0o600
        out.write_text("mine")
        r = cli(hub, "board", "export", "-o", str(out))
        assert r.returncode == 1 and "(file_exists)" in r.stderr and out.read_text() == "mine"
        r = cli(hub, "board", "export", "--project", "rel-9", "--format", "json", "-o", str(out), "--force")
        assert r.returncode == 0
        exported = json.loads(out.read_text())
        assert exported["project"] == "rel-9" and [p["id"] for p in exported["posts"]] == ["p2"]

        # the board's events are on the log (and the live bus) as the board family
        kinds = [e["data"]["kind"] for e in ok(c.get("/v1/events", params={"kinds": "board", "limit": 100}))["events"]]
        assert kinds[:3] == ["Board.Created", "Board.Posted", "Board.Posted"] and "Board.Resumed" in kinds


def test_refusals_change_nothing(hub):
    with hub.client() as c:
        ok(c.post("/v1/board", json={"text": "first"}))
        before = at(c)
        for method, path, body, status, code in (
                ("POST", "/v1/board/p9/replies", {"text": "x"}, 404, "no_post"),
                ("POST", "/v1/board/zz/replies", {"text": "x"}, 404, "no_post"),
                ("POST", "/v1/board", {"text": "   "}, 422, "empty_message"),
                ("POST", "/v1/board", {"text": "x", "project": "no spaces"}, 422, "invalid_project"),
                ("POST", "/v1/board", {"text": "x", "task": "t7"}, 404, "no_task"),
                ("POST", "/v1/board", {"text": "x", "color": "red"}, 422, None),
                ("POST", "/v1/board/pause", {"on": False}, 409, "no_change"),
                ("GET", "/v1/board/export?format=pdf", None, 422, "invalid_format"),
                ("GET", "/v1/conversations/3~5", None, 404, "no_conversation")):
            r = c.request(method, path, json=body)
            assert r.status_code == status, (path, r.text)
            if code:
                assert r.json()["error"]["code"] == code, (path, r.text)
        assert at(c) == before
        assert [p["id"] for p in ok(c.get("/v1/board"))["posts"]] == ["p1"]


def test_conversations_list_and_show(hub):
    with hub.client() as c:
        (orch,) = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "orchestrator"}))["agents"]]
        assert cli(hub, "agents", "tell", str(orch), "--text", "Plan the release notes").returncode == 0
        r = cli(hub, "conversations", "list")
        assert r.returncode == 0 and f"owner~{orch}" in r.stdout and "Plan the release notes" in r.stdout
        shown = cli(hub, "conversations", "show", f"owner~{orch}")
        assert shown.returncode == 0 and f"-- owner to {orch}" in shown.stdout
        mine = ok(c.get("/v1/conversations", params={"party": "owner"}))["conversations"]
        assert [t["id"] for t in mine] == [f"owner~{orch}"]
        assert ok(c.get("/v1/conversations", params={"party": "99"}))["conversations"] == []
