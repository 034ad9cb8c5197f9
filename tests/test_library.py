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
    assert bad["error"]["code"] == "no_shared_file"  # a shared file is named by its number (f3), nothing else
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
    files = [f for f in (api.hub.folders.data / "library").iterdir() if not f.name.startswith("f-")]
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o600"  # the shared files are f-...


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


def hub_shows(hub: HubProcess, numbers: list[str]) -> None:
    """Wait until the hub's read models show exactly these items (it follows the second writer's log)."""
    from support.deadline import until

    def shown() -> bool:
        with hub.client() as c:
            return [i["number"] for i in c.get("/v1/library").json()["items"]] == numbers

    until(f"the hub lists {numbers}", shown, 30)


def round_trip_through_the_cli(hub: HubProcess, tmp_path, storage: str, before: tuple = ()) -> None:
    store, lib = second_writer(hub)
    try:
        number = lib.submit(lib.cmds.context("agent:7"), REPORT, "findings.md", "Findings", "for the review").value
    finally:
        store.close()
    hub_shows(hub, [number] + [i for i in before if i != number])
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


@pytest.fixture
def s3(tmp_path, monkeypatch):
    """A real S3 API endpoint: moto's standalone server, on its own port, with one bucket."""
    import subprocess
    import sys

    import boto3
    from support.deadline import until
    from support.hubproc import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    creds = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    for k, v in creds.items():
        monkeypatch.setenv(k, v)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

    def bucket_made() -> bool:
        try:
            client.create_bucket(Bucket="deliverables")
            return True
        except Exception:  # noqa: BLE001 - the server is not listening yet
            return False

    until("the S3 endpoint answers", bucket_made, 60)
    monkeypatch.setenv("APZ_LIBRARY_S3_URL", f"s3://deliverables/plaza?endpoint={endpoint}&region=us-east-1")
    yield client
    proc.terminate()
    proc.wait(timeout=15)


@pytest.fixture
def s3_hub(s3, folders, database_url):
    h = HubProcess(folders, database_url).start()
    yield h
    h.stop()


def test_with_object_storage_configured_the_bytes_live_in_the_bucket(s3_hub, s3, tmp_path):
    store, lib = second_writer(s3_hub)
    try:
        number = lib.submit(lib.cmds.context("agent:7"), PNG, "chart.png", "The chart").value
    finally:
        store.close()
    hub_shows(s3_hub, [number])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="deliverables").get("Contents", [])]
    assert len(keys) == 1 and keys[0].startswith("plaza/")
    assert s3.get_object(Bucket="deliverables", Key=keys[0])["Body"].read() == PNG
    assert not (s3_hub.folders.data / "library").exists()
    out = tmp_path / "chart.png"
    r = cli(s3_hub, "library", "download", number, "-o", str(out))
    assert r.returncode == 0 and out.read_bytes() == PNG
    round_trip_through_the_cli(s3_hub, tmp_path, "s3", before=(number,))
    r = cli(s3_hub, "library", "delete", number, "--yes")
    assert r.returncode == 0
    assert s3.list_objects_v2(Bucket="deliverables").get("KeyCount") == 0


def test_the_library_read_model_rebuilt_from_event_one_equals_the_live_one(hub):
    store, lib = second_writer(hub)
    try:
        ctx = lib.cmds.context("agent:7")
        kept = lib.submit(ctx, REPORT, "a.md", "Kept", task="t1").value
        gone = lib.submit(ctx, PNG, "b.png", "Gone").value
        lib.delete(lib.cmds.context("owner"), gone)
    finally:
        store.close()
    hub_shows(hub, [kept])
    live = json.loads(cli(hub, "--json", "library", "list").stdout)
    assert [i["number"] for i in live["items"]] == [kept]
    assert cli(hub, "replay", "--rebuild", "library").returncode == 0
    hub.stop()
    again = HubProcess(hub.folders, hub.env.get("APZ_DATABASE_URL")).start()
    try:
        assert json.loads(cli(again, "--json", "library", "list").stdout) == live
    finally:
        again.stop()


def test_a_preview_is_sandboxed_and_only_the_hubs_own_pages_may_frame_it(api):
    """The console's Library screen frames a preview (an HTML report runs there): the hub's own pages may
    frame it, no other site may, and it stays sandboxed in an opaque origin. A download is never framed."""
    from agentplaza.api.routes.library import INLINE_CSP

    cid, s = builder(api.hub)
    number = hand_in(s, "report.html", b"<!doctype html><p>hi</p><script>document.title='x'</script>", "Report")["result"]["item"]
    api.hub.read_models.catch_up()
    inline = api.get(f"/v1/library/{number}/content", params={"inline": "1"})
    assert inline.status_code == 200 and inline.headers["content-type"].startswith("text/html")
    policy = dict(d.strip().split(" ", 1) for d in inline.headers["content-security-policy"].split(";"))
    assert inline.headers["content-security-policy"] == INLINE_CSP
    assert policy["sandbox"] == "allow-scripts" and "allow-same-origin" not in INLINE_CSP
    assert policy["frame-ancestors"] == "'self'" and policy["default-src"] == "'none'"
    assert inline.headers["x-frame-options"] == "SAMEORIGIN" and inline.headers["x-content-type-options"] == "nosniff"
    assert "connect-src" not in policy and "form-action" not in policy  # default-src 'none' covers fetches
    download = api.get(f"/v1/library/{number}/content")
    assert download.headers["x-frame-options"] == "DENY" and download.headers["content-type"] == "application/octet-stream"
    assert "frame-ancestors 'none'" in download.headers["content-security-policy"]
    assert "attachment" in download.headers["content-disposition"]


def test_a_blobs_key_comes_from_the_commands_ids_so_the_same_ids_give_the_same_keys(tmp_path):
    """A deliverable's and a shared file's key in the store: the digest and the commands' own id (random
    on a hub; a run that gives the commands its ids gets the same keys every time), never a second
    random source of the store's own."""
    from agentplaza.config import Folders
    from agentplaza.runtime.files import KEY_PREFIX, FileStore

    def keys(run: str) -> list[str]:
        folders = Folders(tmp_path / run / "state", tmp_path / run / "config", tmp_path / run / "data").make()
        store = EventStore.open(state_dir=folders.state)
        ids = iter(f"{n:032x}" for n in range(1000))
        hub = types.SimpleNamespace(commands=Commands(store, new_id=lambda: next(ids)), folders=folders)
        try:
            lib, files = LibraryService(hub), FileStore(hub)
            item = lib.submit(hub.commands.context("agent:7"), REPORT, "findings.md", "Findings", "for the review").value
            shared = files.share(hub.commands.context("agent:7"), 7, "notes/a.md", REPORT).value
            return [_key_of(store, item),
                    _key_of(store, shared)]
        finally:
            store.close()

    first, again = keys("one"), keys("two")
    assert first == again
    assert first[0].startswith(hashlib.sha256(REPORT).hexdigest()[:32] + "-")
    assert first[1].startswith(KEY_PREFIX + hashlib.sha256(REPORT).hexdigest()[:32] + "-")


def _key_of(store: EventStore, number: str) -> str:
    return next(e.data["key"] for e in store.read() if e.data.get("number") == number and "key" in e.data)
