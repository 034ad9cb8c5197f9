"""The shared file store: ``vm.share_file`` publishes into the library's store (public by default, or
shared with only the agents named); a message or a board post carries a shared file by its number;
agents read one by its number (``plaza_file_read``, a read tool the laws pass); the owner sees each one
in the Library and deletes it. Nothing is left in a folder nobody lists."""

from __future__ import annotations

import base64
import hashlib

import pytest
from starlette.testclient import TestClient
from support.sessions import at_work

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.domain.base import Refusal
from agentplaza.domain.files import MAX_AUDIENCE, SharedFile

NOTES = b"# Findings\n\nThe cache is cold on Mondays.\n"
SECRET_PLAN = b"only for the reviewer\n"


@pytest.fixture
def api(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        c.hub = hub
        yield c
    hub.close()


def share(s, path: str, data: bytes, **more) -> dict:
    return s.handle({"op": "share", "path": path, "content": base64.b64encode(data).decode(), **more})


def call(s, tool: str, **args) -> dict:
    return s.handle({"op": "tool", "tool": tool, "args": args})


def test_a_public_file_is_read_by_every_agent_and_a_named_one_only_by_those_named(api):
    (a, sa), (b, sb), (c, sc) = at_work(api.hub, "researcher", "builder", "reviewer")
    public = share(sa, "out/notes.md", NOTES)["name"]
    private = share(sa, "plan.txt", SECRET_PLAN, agents=[c])["name"]
    assert (public, private) == ("f1", "f2")
    got = call(sb, "plaza_file_read", file=public)["result"]
    assert got["text"] == NOTES.decode() and got["sha256"] == hashlib.sha256(NOTES).hexdigest()
    assert got["owner"] == a and got["public"] is True and got["filename"] == "notes.md"
    assert call(sb, "plaza_file_read", file=private)["error"]["code"] == "not_shared_with_you"
    assert call(sc, "plaza_file_read", file=private)["result"]["text"] == SECRET_PLAN.decode()
    assert call(sa, "plaza_file_read", file=private)["result"]["public"] is False  # the sharer always may
    api.hub.read_models.catch_up()  # the list reads the read model (the runtime's follower polls it)
    listed = [f["number"] for f in call(sb, "plaza_file_read")["result"]["files"]]
    assert listed == ["f1"]  # b is shown only what it may read
    assert [f["number"] for f in call(sc, "plaza_file_read")["result"]["files"]] == ["f2", "f1"]
    assert call(sb, "plaza_file_read", file="f9")["error"]["code"] == "no_shared_file"
    assert call(sb, "plaza_file_read", file="../../owner-token")["error"]["code"] == "no_shared_file"


def test_a_message_and_a_board_post_carry_a_shared_file_their_readers_may_read(api):
    (a, sa), (b, sb), (c, sc) = at_work(api.hub, "researcher", "builder", "reviewer")
    public = share(sa, "notes.md", NOTES)["name"]
    private = share(sa, "plan.txt", SECRET_PLAN, agents=[c])["name"]
    refused = call(sa, "plaza_message", to=b, text="see the plan", file=private)
    assert refused["error"]["code"] == "invalid_file" and f"agent {b}" in refused["error"]["message"]
    sent = call(sa, "plaza_message", to=c, text="see the plan", file=private)
    assert sent["result"]["sent"] is True
    told = sc.handle({"op": "next", "wait": 0})  # c is busy with "work": its queue holds the message
    assert told.get("item") is None or "f2" in told["item"]["text"]
    assert call(sa, "plaza_board_post", text="the plan", file=private)["error"]["code"] == "invalid_file"
    posted = call(sa, "plaza_board_post", text="findings for @builder", file=public)
    assert posted["result"]["file"] == public
    api.hub.read_models.catch_up()
    post = api.get(f"/v1/board/{posted['result']['id']}").json()
    assert (post.get("post") or post)["file"] == public
    read = call(sb, "plaza_board_read", all=True)["result"]["posts"]
    assert read[-1]["file"] == public
    assert call(sa, "plaza_board_post", text="x", reply_to=posted["result"]["id"], file=public)["error"]["code"] \
        == "invalid_file"


def test_the_owner_sees_every_shared_file_in_the_library_downloads_it_and_deletes_it(api):
    (a, sa), (b, sb) = at_work(api.hub, "researcher", "builder")
    public = share(sa, "out/notes.md", NOTES)["name"]
    private = share(sb, "plan.txt", SECRET_PLAN, agents=[])["name"]  # only its sharer
    api.hub.read_models.catch_up()
    files = api.get("/v1/library/shared").json()["files"]
    assert [(f["number"], f["public"], f["agents"], f["by"], f["kind"]) for f in files] == [
        (private, False, [], f"agent:{b}", "text"), (public, True, [], f"agent:{a}", "text")]
    assert [f["number"] for f in api.get("/v1/library/shared", params={"q": "notes"}).json()["files"]] == [public]
    assert api.get("/v1/library").json()["items"] == []  # shared files are not deliverables
    shown = api.get(f"/v1/library/{private}").json()["item"]
    assert shown["path"] == "plan.txt" and shown["size"] == len(SECRET_PLAN)
    got = api.get(f"/v1/library/{private}/content")
    assert got.content == SECRET_PLAN and "attachment" in got.headers["content-disposition"]
    assert api.delete(f"/v1/library/{public}").json() == {"deleted": public}
    api.hub.read_models.catch_up()
    assert [f["number"] for f in api.get("/v1/library/shared").json()["files"]] == [private]
    assert call(sb, "plaza_file_read", file=public)["error"]["code"] == "no_shared_file"
    assert api.delete(f"/v1/library/{public}").json()["error"]["code"] == "no_shared_file"
    state = api.hub.folders.state
    assert not (state / "shared").exists()  # no folder nobody lists: the bytes are in the library's store
    kept = sorted(p.name for p in (api.hub.folders.data / "library").iterdir())
    assert len(kept) == 1 and kept[0].startswith("f-")


def test_a_deliverable_is_handed_in_from_a_file_its_agent_shared_and_no_other(api):
    (a, sa), (b, sb) = at_work(api.hub, "researcher", "builder")
    mine = share(sb, "chart.md", NOTES)["name"]
    theirs = share(sa, "other.md", NOTES)["name"]
    assert call(sb, "plaza_library_submit", file=mine, title="Chart")["result"] == {"item": "d1", "submitted": True}
    assert call(sb, "plaza_library_submit", file=theirs, title="Not mine")["error"]["code"] == "no_item"


def test_bad_input_is_refused_and_changes_nothing(api):
    (a, sa), = at_work(api.hub, "researcher")
    before = api.hub.commands.store.max_position()
    for agents_ in ("everyone", [1.5], [-1], [True], list(range(MAX_AUDIENCE + 1))):
        r = share(sa, "notes.md", NOTES, agents=agents_)
        assert r["error"]["code"] == "invalid_request", agents_
    assert share(sa, "notes.md", b"")["error"]["code"] == "empty_value"
    assert api.hub.commands.store.max_position() == before  # refused before the laws: no decision, no file
    assert share(sa, "notes.md", NOTES)["name"] == "f1"  # nothing was numbered by a refused share


def test_who_may_read_is_one_rule():
    f = SharedFile.__new__(SharedFile)
    f.__init__("f1", 3, "a", "a", "text/plain", 1, "0" * 64, "local", "k", False, [5])
    assert f.may_read(3) and f.may_read(5) and not f.may_read(4)
    f.deleted = True
    assert not f.may_read(3)
    with pytest.raises(Refusal) as e:
        f.check_readable(3)
    assert e.value.code == "no_shared_file"
