"""agentplaza unfurl TARGET: preview cards for tasks, agents, plaza links and fetched links, and the
rules that keep the hub's fetch from being a door into its network."""

from __future__ import annotations

import http.server
import json
import threading

import pytest
from support.hubproc import HubProcess, cli, free_port, ok

from agentplaza.cli.commands.unfurl import card, hyperlink
from agentplaza.domain import unfurl as targets
from agentplaza.domain.base import Refusal
from agentplaza.runtime import linkfetch

PAGE = (b"<html><head><title>The release &amp; its notes</title>"
        b"<meta name='description' content='Everything in 0.2'></head><body>hi</body></html>")


class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the library's name
        if self.path == "/moved":
            return self._redirect("/page")
        if self.path == "/to-file":
            return self._redirect("file:///etc/passwd")
        if self.path == "/loop":
            return self._redirect("/loop")
        if self.path == "/huge":
            body = b"<html><head>" + b" " * (linkfetch.MAX_PAGE_BYTES + 10) + b"<title>too far</title></head></html>"
        elif self.path == "/page":
            body = PAGE
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def pages():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def start(folders, **env):
    h = HubProcess(folders)
    h.env.update(APZ_NODE="off", **env)
    return h.start()


@pytest.fixture
def hub(folders, pages):
    """A hub that may preview pages on this machine's loopback (the test's page server)."""
    h = start(folders, APZ_PREVIEW_PRIVATE="on", APZ_PREVIEW_PORTS=pages.rsplit(":", 1)[1])
    yield h
    h.stop()


def unfurl(h, *target: str) -> dict:
    r = cli(h, "--json", "unfurl", *target)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# -- what a target names ----------------------------------------------------------------------------------


def test_targets():
    for text in ("#12", "task #12", "Task #12", "t12", "task 12", "# 12"):
        assert targets.target(text) == targets.Target("task", "t12"), text
    assert targets.target("@Builder") == targets.Target("agent", "Builder")
    assert targets.target("a3") == targets.Target("approval", "a3")
    assert targets.target("https://example.com/x").kind == "link"
    for bad in ("", "ftp://example.com", "hello", "@", "@a b", "x" * 3000):
        with pytest.raises(Refusal) as e:
            targets.target(bad)
        assert e.value.code in ("invalid_target", "invalid_cid"), bad


def test_github_links_are_named_by_kind():
    assert targets.github("https://github.com/o/r/pull/12") == ("pull request", "o/r#12")
    assert targets.github("https://github.com/o/r/issues/3") == ("issue", "o/r#3")
    assert targets.github("https://github.com/o/r/commit/0123456789abcdef") == ("commit", "o/r@0123456")
    assert targets.github("https://github.com/o/r/blob/main/src/a.py") == ("file", "o/r:src/a.py")
    assert targets.github("https://github.com/o/r/actions/runs/9") == ("run", "o/r run 9")
    assert targets.github("https://github.com/o/r/releases/tag/v1") == ("release", "o/r v1")
    assert targets.github("https://github.com/o/r") == ("repository", "o/r")
    assert targets.github("https://gist.github.com/u/abc") == ("gist", "gist abc")
    assert targets.github("https://example.com/o/r/pull/1") is None


# -- the fetch's rules ----------------------------------------------------------------------------------


def public(host, port):
    return ["93.184.215.14"]


@pytest.mark.parametrize("url, why", [
    ("file:///etc/passwd", "only http and https"),
    ("http://127.0.0.1/", "a loopback address"),
    ("http://10.0.0.8/", "a private address"),
    ("http://169.254.169.254/latest/meta-data", "a cloud metadata address"),
    ("http://metadata.google.internal/", "a cloud metadata service"),
    ("http://[::1]/", "a loopback address"),
    ("http://example.com:22/", "port 22 is not a web port"),
    ("http://user:pw@example.com/", "user name or password"),
    ("http://blocked.example.org/", "on the fetch blocklist"),
])
def test_the_fetch_refuses_what_an_agent_may_not_reach(url, why):
    with pytest.raises(linkfetch.NotReachable) as e:
        linkfetch.check(url, linkfetch.Rules(), ["example.org"], public)
    assert why in str(e.value)


def test_a_name_that_resolves_to_a_private_address_is_refused_and_the_checked_address_is_dialled():
    with pytest.raises(linkfetch.NotReachable, match="resolves to 192.168.1.4, a private address"):
        linkfetch.check("http://sneaky.example.com/", linkfetch.Rules(), (), lambda h, p: ["93.184.215.14", "192.168.1.4"])
    assert linkfetch.check("https://example.com/x", linkfetch.Rules(), (), public) == ("https", 443, "93.184.215.14")
    private = linkfetch.Rules(allow_private=True)
    assert linkfetch.check("http://10.0.0.8/", private, (), public)[2] == "10.0.0.8"
    with pytest.raises(linkfetch.NotReachable, match="metadata"):  # never, whatever the hub allows
        linkfetch.check("http://169.254.169.254/", private, (), public)


def test_rules_from_the_environment():
    assert linkfetch.Rules.from_env({}) == linkfetch.Rules()
    r = linkfetch.Rules.from_env({"APZ_PREVIEW_PRIVATE": "on", "APZ_PREVIEW_PORTS": "8080"})
    assert r.allow_private and 8080 in r.ports and 443 in r.ports


# -- the card in the terminal --------------------------------------------------------------------------


def test_the_label_is_a_terminal_hyperlink_only_where_links_work():
    d = {"kind": "task", "label": "#1", "title": "Notes", "url": "http://hub/v1/tasks/t1", "fields": {}}
    assert "\x1b]8;;http://hub/v1/tasks/t1\x1b\\#1\x1b]8;;\x1b\\" in card(d, links=True)
    assert "\x1b" not in card(d, links=False) and "http://hub/v1/tasks/t1" in card(d, links=False)
    assert hyperlink("x", "http://a/\x1b]0;evil", True) == "x"  # a URL with a control character is not a link
    evil = dict(d, title="bad \x1b]0;owned\x07 title", excerpt="\x1b[2J")
    assert "\x1b]0" not in card(evil, links=True) and "\x07" not in card(evil, links=True)


# -- through a real hub ---------------------------------------------------------------------------------


def test_task_agent_and_plaza_link_cards(hub):
    with hub.client() as c:
        ok(c.post("/v1/tasks", json={"title": "Write the release notes", "acceptance": "x", "budget": 50,
                                     "role": "builder"}))
        ok(c.post("/v1/agents", json={"role": "builder", "count": 1}))
        ok(c.patch("/v1/agents/3", json={"name": "Builder"}))
    d = unfurl(hub, "#1")
    assert (d["kind"], d["label"], d["title"], d["state"]) == ("task", "#1", "Write the release notes", "open")
    assert d["fields"]["assignee"] is None and d["url"].endswith("/v1/tasks/t1")
    assert unfurl(hub, "task", "#1") == dict(d, target="task #1")
    a = unfurl(hub, "@Builder")
    assert (a["kind"], a["label"], a["fields"]["role"], a["fields"]["status"]) == ("agent", "@Builder", "builder", "offline")
    assert a["fields"]["model"] and a["fields"]["cid"] == 3
    assert unfurl(hub, "@builder")["fields"]["cid"] == 3 and unfurl(hub, "@3")["label"] == "@Builder"
    assert unfurl(hub, f"{hub.url}/tasks/t1")["title"] == "Write the release notes"  # a plaza link, never fetched
    assert unfurl(hub, f"{hub.url}/v1/agents/3")["label"] == "@Builder"
    r = cli(hub, "unfurl", "#1")  # piped: plain text, no escapes
    assert r.returncode == 0 and r.stdout.startswith("#1  Write the release notes") and "\x1b" not in r.stdout
    for target, code in (("#9", "no_task"), ("@Nobody", "unknown_agent"), ("hello", "invalid_target")):
        r = cli(hub, "unfurl", target)
        assert r.returncode == 1 and f"({code})" in r.stderr, (target, r.stderr)


def test_a_plain_link_gets_its_title_and_a_clear_not_reachable_otherwise(hub, pages):
    d = unfurl(hub, f"{pages}/page")
    assert (d["kind"], d["title"], d["excerpt"], d["reachable"]) == ("link", "The release & its notes",
                                                                    "Everything in 0.2", True)
    assert unfurl(hub, f"{pages}/moved")["title"] == "The release & its notes"  # a redirect, checked again
    bad = unfurl(hub, f"{pages}/to-file")
    assert bad["reachable"] is False and "only http and https" in bad["why"] and bad["url"] == f"{pages}/to-file"
    assert "more than 3 redirects" in unfurl(hub, f"{pages}/loop")["why"]
    assert unfurl(hub, f"{pages}/huge")["title"] is None  # read no further than the limit
    gone = unfurl(hub, f"{pages}/gone")
    assert gone["reachable"] is False and "answered 404" in gone["why"]
    r = cli(hub, "unfurl", "http://127.0.0.1:9/")
    assert r.returncode == 0 and "not reachable" in r.stdout


def test_a_hub_without_the_private_setting_does_not_fetch_this_machine(folders, pages):
    h = start(folders)
    try:
        d = unfurl(h, f"{pages}/page")
        assert d["reachable"] is False and d["state"] == "not reachable" and d["title"] is None
        assert "is not a web port" in d["why"] or "a loopback address" in d["why"]
        d = unfurl(h, "http://127.0.0.1/")
        assert "a loopback address" in d["why"]
    finally:
        h.stop()
