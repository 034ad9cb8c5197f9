"""The Library of deliverables: an agent hands in a file it shared; the owner lists, searches, filters,
shows, downloads (byte-identical) and deletes it, over the API and the CLI; with object storage
configured, the same against a real S3 API endpoint (moto's standalone server)."""

from __future__ import annotations

import base64
import hashlib
import json
import types

import pytest
from starlette.testclient import TestClient
from support.hubproc import HubProcess, cli

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands.unit import Commands
from agentplaza.events.store import EventStore
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.library import LibraryService
from agentplaza.runtime.librarystore import sniff
from agentplaza.runtime.session import HarnessSession

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
REPORT = b"# Findings\n\nThree approaches, compared.\n"


@pytest.fixture
def api(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        c.hub = hub
        yield c
    hub.close()


def builder(hub):
    cid = ac.spawn(hub.commands, hub.commands.context("owner"), "builder", 1).value[0]
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    s.handle({"op": "hello"})
    ac.tell(hub.commands, hub.commands.context("owner"), cid, "work")
    s.handle({"op": "next", "wait": 0})
    return cid, s


def hand_in(s, path: str, data: bytes, title: str, **more) -> dict:
    shared = s.handle({"op": "share", "path": path, "content": base64.b64encode(data).decode()})
    return s.handle({"op": "tool", "tool": "plaza_library_submit", "args": {"file": shared["name"], "title": title,
                                                                            **more}})


def test_a_deliverable_handed_in_is_listed_downloaded_byte_identical_and_deleted(api):
    cid, s = builder(api.hub)
    r = hand_in(s, "out/chart.png", PNG, "The chart", description="Spend by week", task="t9")
    assert r["result"] == {"item": "d1", "submitted": True}, r
    assert hand_in(s, "NOTES.md", REPORT, "Findings")["result"]["item"] == "d2"
    bad = s.handle({"op": "tool", "tool": "plaza_library_submit", "args": {"file": "../../owner-token", "title": "x"}})
    assert bad["error"]["code"] == "no_item"
    api.hub.read_models.catch_up()  # written beside the app (as the runtime does); the follower polls
    items = api.get("/v1/library").json()["items"]
    assert [(i["number"], i["kind"], i["media_type"], i["by"]) for i in items] == [
        ("d2", "text", "text/markdown", f"agent:{cid}"), ("d1", "image", "image/png", f"agent:{cid}")]
    assert [i["number"] for i in api.get("/v1/library", params={"type": "image"}).json()["items"]] == ["d1"]
    assert [i["number"] for i in api.get("/v1/library", params={"q": "week"}).json()["items"]] == ["d1"]
    one = api.get("/v1/library/d1").json()["item"]
    assert one["sha256"] == hashlib.sha256(PNG).hexdigest() and one["size"] == len(PNG) and one["task"] == "t9"
    assert one["filename"] == "chart.png" and one["storage"] == "local"
    got = api.get("/v1/library/d1/content")
    assert got.status_code == 200 and got.content == PNG and "attachment" in got.headers["content-disposition"]
    inline = api.get("/v1/library/d1/content", params={"inline": "1"})
    assert inline.headers["content-type"] == "image/png" and "sandbox" in inline.headers["content-security-policy"]
    assert api.delete("/v1/library/d1").json() == {"deleted": "d1"}
    assert api.get("/v1/library/d1").status_code == 404
    assert api.get("/v1/library/d1/content").json()["error"]["code"] == "no_item"
    assert [i["number"] for i in api.get("/v1/library").json()["items"]] == ["d2"]
    files = list((api.hub.folders.data / "library").iterdir())
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o600"


def test_an_items_type_comes_from_its_content_not_its_name():
    assert sniff(PNG, "report.txt") == "image/png"
    assert sniff(b"%PDF-1.7\n...", "x.png") == "application/pdf"
    assert sniff(b"<!DOCTYPE html><p>hi", "a.txt") == "text/html"
    assert sniff(b'{"a": 1}', "a.bin") == "application/json"
    assert sniff(b"a,b\n1,2\n", "t.csv") == "text/csv"
    assert sniff(b"\xff\xfe\x00garbage", "a.txt") == "application/octet-stream"


def second_writer(hub: HubProcess):
    store = EventStore.open(state_dir=hub.folders.state, database_url=hub.env.get("APZ_DATABASE_URL"))
    return store, LibraryService(types.SimpleNamespace(commands=Commands(store), folders=hub.folders))


def round_trip_through_the_cli(hub: HubProcess, tmp_path, storage: str) -> None:
    store, lib = second_writer(hub)
    try:
        number = lib.submit(lib.cmds.context("agent:7"), REPORT, "findings.md", "Findings", "for the review").value
    finally:
        store.close()
    r = cli(hub, "library", "list")
    assert r.returncode == 0 and number in r.stdout and "Findings" in r.stdout
    shown = json.loads(cli(hub, "--json", "library", "show", number).stdout)["item"]
    assert shown["storage"] == storage and shown["by"] == "agent:7"
    out = tmp_path / "got.md"
    r = cli(hub, "library", "download", number, "-o", str(out))
    assert r.returncode == 0 and out.read_bytes() == REPORT
    r = cli(hub, "library", "delete", number)
    assert r.returncode == 1 and "--yes" in r.stderr
    r = cli(hub, "library", "delete", number, "--yes")
    assert r.returncode == 0 and f"deleted {number}" in r.stdout
    r = cli(hub, "library", "download", number, "-o", str(out))
    assert r.returncode == 1 and "(no_item)" in r.stderr


def test_the_cli_lists_shows_downloads_and_deletes(hub, tmp_path):
    round_trip_through_the_cli(hub, tmp_path, "local")
