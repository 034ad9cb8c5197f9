"""Send generated requests to a real hub and hold it to the oracle after every one.

The oracle, after every request:
  * no answer is a 5xx, and every request gets an answer;
  * the hub is alive: ``GET /v1/health`` answers ``{"ok": true}``;
  * a refusal (4xx) changed nothing: no event carries the request's correlation id (the hub's own
    loops, the scheduler and the vault's use records, write on their own, so the position alone
    cannot say whose event it was);
  * the log is readable from event 1: ``GET /v1/events`` reads every event written since the last
    check (so all of them, over the run) and ``GET /v1/audit/verify`` finds the chain intact.
A failure is kept once per kind (the route, what broke, the status, the hub's own last error line),
with the shortest request that showed it and its answer.  A hub that died is replaced by a fresh
one, so the run goes on and names every route that breaks.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from fuzz.hostile import Pick, RawBytes, encode
from fuzz.routemap import RouteSpec

#: How long one request may take before the hub counts as hung.
REQUEST_TIMEOUT_S = 30.0
#: Events read per page when the oracle walks the log.
EVENTS_PAGE = 1000
#: Values harvested from the hub's answers, kept for path parameters and bodies.
POOL_SIZE = 400
#: Keys whose values in an answer name something a later request can use.
ID_KEYS = {"id", "cid", "number", "name", "key", "pid", "sid", "ident", "account", "task", "role", "worker",
           "agent", "slot", "model", "ref", "source", "kind"}
#: How much of a request or an answer a failure quotes.
QUOTE_CHARS = 400


#: A short pattern repeated this often is quoted as <N x pattern>: nesting bombs, long strings.
_RUN = re.compile(r"(.{1,6}?)\1{11,}", re.S)


def _quote(raw: bytes | str, limit: int = QUOTE_CHARS) -> str:
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    text = _RUN.sub(lambda m: f"<{len(m.group(0)) // len(m.group(1))} x {m.group(1)}>", text)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 60]} ...({len(text)} chars)... {text[-40:]}"


#: A refusal that names the values a field takes: "an approval's kind is one of agent, payment, tool".
_ONE_OF = re.compile(r"(\w+)(?::| is| must be) one of ([\w\-/., ]+?)(?: or \w+)?(?:$|[.;(])")


class Pool:
    """Ids and names the hub answered, by the key it answered them under, and the words its refusals
    said a field takes: what a client would send back."""

    def __init__(self) -> None:
        self.values: list[Any] = ["1", "n0", "builder"]
        self.by_key: dict[str, list[Any]] = {}
        self._seen = set(self.values)
        self._turn = 0

    def pick(self, index: int, field: str = "") -> Any:
        known = self.by_key.get(field)
        if known and index % 4 != 3:  # generated indexes lean small: 0 means this field's own values
            return known[index % len(known)]
        return self.values[(index // 4) % len(self.values)]

    def known(self, field: str) -> Any:
        """The next of the values this field was answered with or named as taking (None: none known)."""
        values = self.by_key.get(field)
        if not values:
            return None
        self._turn += 1
        return values[self._turn % len(values)]

    def keep(self, key: str, value: Any) -> None:
        known = self.by_key.setdefault(key, [])
        if value not in known:
            known.append(value)
            del known[:-POOL_SIZE // 8]

    def learn(self, message: str) -> None:
        for name, words in _ONE_OF.findall(message):
            for word in words.split(", "):
                self.keep(name, word.strip())

    def harvest(self, data: Any, key: str | None = None) -> None:
        if isinstance(data, dict):
            for k, v in data.items():
                self.harvest(v, k)
        elif isinstance(data, list):
            for v in data[:50]:
                self.harvest(v, key)
        elif key is not None and isinstance(data, str | int) and not isinstance(data, bool) and len(str(data)) <= 80:
            self.keep(key, data)
            if key in ID_KEYS and data not in self._seen:
                self._seen.add(data)
                self.values.append(data)
                if len(self.values) > POOL_SIZE:
                    self._seen.discard(self.values.pop(3))


@dataclass
class FuzzRequest:
    method: str
    path: str
    path_values: dict[str, Any]
    query: list[tuple[str, Any]]
    body: Any
    content_type: str | None
    correlation_prefix: str = ""


@dataclass
class Sent:
    """A request as it went on the wire."""

    method: str
    url: str
    content: bytes | None
    headers: dict[str, str]

    def describe(self) -> str:
        ct = self.headers.get("content-type")
        head = f"{self.method} {_quote(self.url, 300)}"
        if ct != "application/json":
            head += f"  [Content-Type: {ct or 'none'}]"
        if len(self.headers.get("x-correlation-id", "")) > 40 or not self.headers.get("x-correlation-id", "x").isascii():
            head += f"  [X-Correlation-Id: {_quote(self.headers['x-correlation-id'], 60)}]"
        if self.content is None:
            return head
        return f"{head}  body={_quote(self.content)}"


def _wire(value: Any) -> str:
    return quote(str(value).encode("utf-8", "surrogatepass"), safe="")


def render(req: FuzzRequest, pool: Pool, correlation_id: str) -> Sent:
    def resolve(v: Any) -> Any:
        return pool.pick(v.index, v.field) if isinstance(v, Pick) else v

    path = req.path
    for name, value in req.path_values.items():
        path = path.replace("{" + name + "}", _wire(resolve(value)) or "x", 1)
    if req.query:
        path += "?" + "&".join(f"{_wire(n)}={_wire(resolve(v))}" for n, v in req.query)
    if req.body is None:
        content = None
    elif isinstance(req.body, RawBytes):
        content = req.body.data
    else:
        content = encode(req.body, pool.pick).encode("utf-8", "surrogatepass")
    headers = {"x-correlation-id": req.correlation_prefix + correlation_id}
    if req.content_type:
        headers["content-type"] = req.content_type
    return Sent(req.method, path, content, headers)


@dataclass
class Failure:
    what: str
    route: str
    request: str
    answer: str
    hub_said: str
    count: int = 1

    def describe(self) -> str:
        lines = [f"{self.what}: {self.route}  (seen {self.count}x)", f"    request: {self.request}",
                 f"    answer:  {self.answer}"]
        if self.hub_said:
            lines.append(f"    hub log: {self.hub_said}")
        return "\n".join(lines)


#: The last line of a traceback: "OverflowError: ...", "orjson.JSONDecodeError: ...".
_ERROR_LINE = re.compile(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b")


class LiveHub:
    """A running hub process whose output is drained (an undrained pipe would stall it) and kept."""

    def __init__(self, proc) -> None:
        self.proc = proc
        self.client = httpx.Client(base_url=proc.url, timeout=REQUEST_TIMEOUT_S)

    @property
    def lines(self) -> list[str]:
        """What the hub printed, line by line (its HubProcess reads the pipe as it goes)."""
        return [line.rstrip("\n") for line in self.proc.lines]

    def last_error(self, since: int) -> str:
        """The hub's last error line (an exception's last line) printed since line ``since``."""
        if not self.alive():
            self.proc.printed_all()  # a hub that exited: all it printed, up to its last word
        for line in reversed(self.lines[since:]):
            text = line.strip().lstrip("|").strip()  # exception groups indent their members with "| "
            if _ERROR_LINE.match(text) or text.startswith("apid:"):
                return text[:300]
        return ""

    def alive(self) -> bool:
        return self.proc.proc.poll() is None

    def stop(self) -> None:
        self.client.close()
        self.proc.stop()


@dataclass
class Fuzzer:
    start_hub: Callable[[], Any]
    hub: LiveHub | None = None
    pool: Pool = field(default_factory=Pool)
    sent: int = 0
    hubs: int = 0
    failures: dict[tuple, Failure] = field(default_factory=dict)
    #: Times audit verify said "no chain link" for an event committed while it read (see check_log).
    verify_races: int = 0
    _read_upto: int = 0
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def live(self) -> LiveHub:
        if self.hub is None or not self.alive():
            if self.hub is not None:
                self.hub.stop()
            self.hub = LiveHub(self.start_hub())
            self.hubs += 1
            self._read_upto = 0
            self.read_log()
        return self.hub

    def alive(self) -> bool:
        return not self.dead()

    def dead(self) -> str:
        """Why the hub does not answer its health check ("" when it does).  A kept-alive connection the
        hub closed after its last answer is not a dead hub: the check tries once more, on a new one."""
        why = ""
        for _ in range(2):
            try:
                r = self.hub.client.get("/v1/health")
                if r.status_code == 200 and r.json() == {"ok": True}:
                    return ""
                why = f"{r.status_code} {_quote(r.text)}"
            except (httpx.HTTPError, ValueError) as e:
                why = f"{type(e).__name__}: {e}"
        return why

    def fail(self, what: str, route: str, sent: Sent | None, answer: str, status: Any, since: int) -> None:
        if what == "hub died" and self.hub is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # a hub going down: let it say why
                self.hub.proc.proc.wait(timeout=10)
        said = self.hub.last_error(since) if self.hub else ""
        key = (what, route, status, said.split(":")[0][:80])
        request = sent.describe() if sent else route
        old = self.failures.get(key)
        if old is None:
            self.failures[key] = Failure(what, route, request, answer, said)
        else:
            old.count += 1
            if len(request) < len(old.request):
                old.request, old.answer, old.hub_said = request, answer, said or old.hub_said

    def read_log(self) -> tuple[list[dict] | None, str]:
        """Every event written since the last read, or None and why not."""
        events = []
        while True:
            try:
                r = self.hub.client.get("/v1/events", params={"after": self._read_upto, "limit": EVENTS_PAGE})
                page = r.json()["events"] if r.status_code == 200 else None
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
                return None, f"{type(e).__name__}: {e}"
            if page is None:
                return None, f"{r.status_code} {_quote(r.text)}"
            events += page
            if page:
                self._read_upto = page[-1]["data"]["position"]
            if len(page) < EVENTS_PAGE:
                return events, ""

    def check_log(self, route: str, sent: Sent | None, answer: str, status: Any, since: int) -> list[dict] | None:
        """The log reads from where the last check stopped, and its chain is intact."""
        events, why = self.read_log()
        if events is None:
            self.fail("log unreadable", route, sent, f"{answer}; then GET /v1/events: {why}", status, since)
            return None
        intact, said = self.verify()
        if not intact and said.startswith("{") and '"event has no chain link"' in said:
            # audit verify reads the events and their chain links in separate queries, so an event the
            # hub's own loops commit between the two reads looks unlinked (reported to the store's owner):
            # a second verify tells that race from a broken chain.
            self.verify_races += 1
            intact, said = self.verify()
        if not intact:
            self.fail("log broken", route, sent, f"{answer}; then audit verify: {_quote(said)}", status, since)
        return events

    def verify(self) -> tuple[bool, str]:
        try:
            v = self.hub.client.get("/v1/audit/verify")
            return v.status_code == 200 and v.json().get("intact") is True, v.text
        except (httpx.HTTPError, ValueError) as e:
            return False, f"{type(e).__name__}: {e}"

    def finish(self, restart: Callable[[], Any]) -> None:
        """The end of a run: the hub starts again on its own log and reads all of it, from event 1."""
        self.live().stop()
        self.hub = None
        try:
            self.hub = LiveHub(restart())
        except RuntimeError as e:
            self.fail("restart failed", "apid", None, _quote(str(e)), None, 0)
            return
        self._read_upto = 0
        self.check_log("apid restart", None, "started", None, 0)

    def check(self, spec: RouteSpec, req: FuzzRequest) -> None:
        hub = self.live()
        since = len(hub.lines)
        cid = f"fuzz-{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        sent = render(req, self.pool, cid)
        self.sent += 1
        found: list[tuple[str, str]] = []  # recorded at the end, once the hub has printed its errors
        status = None
        try:
            r = hub.client.request(sent.method, sent.url, content=sent.content,
                                   headers={k: v.encode("latin-1") for k, v in sent.headers.items()})
            status, answer = r.status_code, f"{r.status_code} {_quote(r.text)}"
        except httpx.HTTPError as e:
            answer = f"{type(e).__name__}: {e}"
            found.append(("no answer", answer))
        if status is not None and status >= 500:
            found.append(("server error", answer))
        elif status is not None:
            try:
                data = r.json()
            except ValueError:
                data = None
            if status < 300:
                self.pool.harvest(data)
            elif isinstance(data, dict) and isinstance(data.get("error"), dict):
                self.pool.learn(str(data["error"].get("message", "")))
        why = self.dead()
        if why:
            found.append(("hub died", f"{answer}; then GET /v1/health: {why}"))
        else:
            events = self.check_log(spec.name, sent, answer, status, since)
            if events is not None and status is not None and 400 <= status < 500:
                mine = [e["data"]["kind"] for e in events
                        if e["data"].get("correlation_id") == sent.headers["x-correlation-id"]]
                if mine:
                    found.append(("refusal changed something", f"{answer}; yet wrote {', '.join(mine)}"))
        for what, said in found:
            self.fail(what, spec.name, sent, said, status, since)

    def report(self) -> str:
        """Every failure, those with the same cause in the hub's log side by side."""
        ordered = sorted(self.failures.values(), key=lambda f: (f.hub_said.split(":")[0], f.what, f.route))
        return "\n".join(f.describe() for f in ordered)
