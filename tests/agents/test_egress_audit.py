"""/v1/egress and /v1/egress/audit: what the Egress screen shows, read from the projections (the
agents' transcripts and the model policy), never from raw events. In process: a real hub, its routes."""

from __future__ import annotations

import warnings

import pytest

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def plaza(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        c.hub = hub
        yield c
    hub.runtime = None
    hub.close()


def egress(hub, cid, verdict, host, why=None):
    """The entry the proxy writes for one connection (runtime.fleet._record_egress)."""
    cmds = hub.commands
    ac.add_entry(cmds, cmds.context(f"agent:{cid}"), cid, "egress", f"{verdict} {host}:443", "egress.connect",
                 {"verdict": verdict, "why": why, "host": host, "port": 443})


def test_the_audit_lists_every_agents_egress_newest_first_filtered_and_paged(plaza):
    hub = plaza.hub
    a, b = ac.spawn(hub.commands, hub.commands.context("owner"), "builder", 2).value
    egress(hub, a, "allowed", "pypi.org")
    egress(hub, b, "refused", "evil.example", "blocked by the fetch blocklist (evil.example)")
    ac.add_entry(hub.commands, hub.commands.context(f"agent:{a}"), a, "tool_call", tool="vm.shell", detail={})
    egress(hub, a, "allowed", "github.com")
    hub.read_models.catch_up()

    got = plaza.get("/v1/egress/audit").json()
    assert [(e["cid"], e["verdict"], e["host"]) for e in got["entries"]] == [
        (a, "allowed", "github.com"), (b, "refused", "evil.example"), (a, "allowed", "pypi.org")]
    assert got["entries"][1]["why"] == "blocked by the fetch blocklist (evil.example)"
    assert got["older"] is None

    refused = plaza.get("/v1/egress/audit", params={"verdict": "refused"}).json()["entries"]
    assert [e["host"] for e in refused] == ["evil.example"]
    mine = plaza.get("/v1/egress/audit", params={"cid": a}).json()["entries"]
    assert [e["host"] for e in mine] == ["github.com", "pypi.org"]

    first = plaza.get("/v1/egress/audit", params={"limit": 1}).json()
    assert [e["host"] for e in first["entries"]] == ["github.com"]
    rest = plaza.get("/v1/egress/audit", params={"limit": 5, "before": first["older"]}).json()
    assert [e["host"] for e in rest["entries"]] == ["evil.example", "pypi.org"]


def test_a_bad_filter_is_refused_and_names_what_it_takes(plaza):
    r = plaza.get("/v1/egress/audit", params={"verdict": "maybe"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"
    assert "allowed, refused, failed" in r.json()["error"]["message"]
    assert plaza.get("/v1/egress/audit", params={"limit": 0}).status_code == 422


def test_the_settings_show_each_nodes_proxy_and_the_fetch_blocklist(plaza):
    r = plaza.patch("/v1/models/policy", json={"fetch_blocklist": ["evil.example", "*.tracker.net"]})
    assert r.status_code == 200, r.text
    got = plaza.get("/v1/egress").json()
    assert got["fetch_blocklist"] == ["evil.example", "*.tracker.net"]
    assert [n["name"] for n in got["nodes"]] == ["n0"]
    assert got["nodes"][0]["egress"] is None  # no runtime in this process: the node reports nothing
