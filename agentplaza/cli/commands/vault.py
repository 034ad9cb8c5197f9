"""agentplaza vault status | unseal [--recovery | --keyfile] | seal | list | set NAME ... | rm ID [--yes]
| import FILE [--nodes] [--bind NAME=B ...] [--shred] | audit [--verify [--offline]] [--after N] [--limit N] | recovery | rekey.

Values, passphrases and codes come only from standard input or a hidden prompt
(getpass), never from the command line; nothing here ever prints a value.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

from ...wire import AUDIT_MAX_LIMIT, DEFAULT_KIND, DOTENV_WARNING, VAULT_PLAZA_SCOPE
from ...wire import VAULT_KINDS as KINDS
from .. import offline
from ..actions import Action, Area, arg, one_of
from ..env import Env
from ..output import pairs, refuse, table


def secret_input(prompt: str, whole: bool = False) -> str:
    """A hidden prompt on a terminal; else one line of standard input (``whole``: all of it,
    for a value that spans lines), without its final newline."""
    if sys.stdin.isatty():
        return getpass.getpass(prompt)
    data = sys.stdin.read() if whole else sys.stdin.readline()
    return data[:-1] if data.endswith("\n") else data


def render_status(s: dict) -> str:
    lines = [pairs({
        "state": s["state"] + (f" ({s['tampered']})" if s.get("tampered") else ""),
        "entries": s["entries"],
        "nodes": ", ".join(s["nodes"]),
        "locked until": s.get("locked_until"),
        "generation": s.get("generation"),
    })]
    slots = [{"id": x["id"], "kind": x["kind"], "since": x.get("at"),
              "file": (x.get("file") + ("" if x.get("file_present") else " (missing)")) if x.get("file") else None}
             for x in s["slots"]]
    return "\n".join(lines + ["", table(slots, ["id", "kind", "since", "file"])])


def render_list(d: dict) -> str:
    rows = [{
        "id": r["id"], "name": r["name"], "kind": r["kind"], "scope": r["scope"],
        "bindings": ",".join(r["bindings"]) or "-", "version": r["version"],
        "kept": ",".join(str(v["v"]) for v in r["versions"]), "hint": ("…" + r["hint"]) if r.get("hint") else None,
        "uses": r["uses"], "last used": r.get("last_used_at"),
    } for r in d["secrets"]]
    return table(rows, ["id", "name", "kind", "scope", "bindings", "version", "kept", "hint", "uses", "last used"])


def render_entry(r: dict) -> str:
    return pairs({"id": r["id"], "name": r["name"], "kind": r["kind"], "scope": r["scope"],
                  "bindings": ",".join(r["bindings"]) or "- (no consumer can read it)", "version": r["version"]})


def render_audit(d: dict) -> str:
    if "intact" in d:
        if d["intact"]:
            return f"intact: {d['lines']} lines"
        return f"BROKEN at line {d['broken_at']}: {d['problem']} ({d['lines']} lines verify before it)"
    rows = [{"n": x.get("n"), "at": x.get("at"), "action": x.get("action"), "actor": x.get("actor"),
             "name": x.get("name"), "consumer": x.get("consumer"), "node": x.get("node"),
             "count": x.get("count"), "detail": x.get("why") or x.get("method") or x.get("slot_kind")}
            for x in d["lines"]]
    return table(rows)


def render_import(d: dict) -> str:
    out = [f"imported {len(d['imported'])}: {', '.join(d['imported']) or '-'}"]
    for s in d["skipped"]:
        out.append(f"skipped line {s['line']}" + (f" ({s['name']})" if s.get("name") else "") + f": {s['reason']}")
    if d.get("unbound"):
        out.append(f"not bound to any consumer (none can read them until bound): {', '.join(d['unbound'])}")
    return "\n".join(out)


def unseal(env: Env) -> int:
    args = env.args
    if args.keyfile:
        body = {"method": "keyfile"}
    elif args.recovery:
        body = {"method": "recovery", "code": secret_input("Recovery code: ")}
    else:
        body = {"method": "passphrase", "passphrase": secret_input("Passphrase: ")}
    return env.show(env.client.post("/v1/vault/unseal", body), render_status)


def set_secret(env: Env) -> int:
    args = env.args
    value = secret_input(f"Value for {args.name}: ", whole=True)
    body = {"name": args.name, "value": value, "kind": args.kind, "bindings": args.bind}
    if args.label is not None:
        body["label"] = args.label
    if args.nodes:
        body["nodes"] = [n for n in args.nodes.split(",") if n.strip()]
    elif args.scope:
        body["scope"] = args.scope
    return env.show(env.client.post("/v1/vault/secrets", body), render_entry)


def audit(env: Env) -> int:
    args = env.args
    if not 1 <= args.limit <= AUDIT_MAX_LIMIT:
        return refuse(f"--limit is 1 to {AUDIT_MAX_LIMIT}", "invalid_request")
    if args.verify:
        return offline.through_hub_or_store(env, lambda c: c.get("/v1/vault/audit/verify"),
                                            offline.vault_audit_verify, render_audit,
                                            status=lambda d: 0 if d["intact"] else 1)
    if args.offline:
        return refuse("--offline goes with --verify", "invalid_request")
    return env.show(env.client.get("/v1/vault/audit", after=args.after, limit=args.limit), render_audit)


def rekey(env: Env) -> int:
    c = env.client
    kinds = {s["kind"] for s in c.get("/v1/vault")["slots"]}
    body = {}
    if "passphrase" in kinds:
        body["passphrase"] = secret_input("Passphrase of the passphrase slot: ")
    if "recovery" in kinds:
        body["recovery"] = secret_input("Recovery code: ")
    return env.show(c.post("/v1/vault/rekey", body),
                    lambda d: f"rekeyed: generation {d['generation']}, {len(d['slots'])} slots locked again")


def import_file(env: Env) -> int:
    args, c = env.args, env.client
    print(f"agentplaza: {DOTENV_WARNING}", file=sys.stderr)
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as e:
        return refuse(f"cannot read {path}: {e.strerror}", "unreadable_file")
    bindings: dict[str, list[str]] = {}
    for b in args.bind:
        name, sep, binding = b.partition("=")
        if not sep or not name or not binding:
            return refuse(f"--bind wants NAME=BINDING, not {b!r}", "invalid_request")
        bindings.setdefault(name.strip(), []).extend(x for x in binding.split(",") if x.strip())
    body = {"text": text, "bindings": bindings}
    if args.nodes:
        body["nodes"] = [n for n in args.nodes.split(",") if n.strip()]
    d = c.post("/v1/vault/import", body)
    env.show(d, render_import)
    if args.shred:
        if d["all_imported"]:
            offline.shred(path)
            print(f"agentplaza: {path} overwritten with zeros and deleted", file=sys.stderr)
        else:
            print(f"agentplaza: {path} kept: not every key was imported", file=sys.stderr)
    return 0


AREA = Area("vault", "the vault: status, unseal, seal, secrets, import, audit, recovery, rekey", (
    Action("status", "the vault's state, slots, entry count and nodes", "GET", "/v1/vault", render=render_status,
           default=True),
    Action("unseal", "unseal the vault (asks for the passphrase)", run=unseal, args=(one_of(
        arg("--recovery", action="store_true", help="unseal with the recovery code"),
        arg("--keyfile", action="store_true", help="unseal with the key file (the hub reads it)")),)),
    Action("seal", "seal the vault: nothing can be read until the next unseal", "POST", "/v1/vault/seal",
           render=render_status),
    Action("list", "names, kinds, scopes, bindings, versions and use; never a value", "GET", "/v1/vault/secrets",
           render=render_list),
    Action("set", "add a secret; the value comes from standard input or a hidden prompt", run=set_secret, args=(
        arg("name", metavar="NAME"),
        arg("--kind", choices=KINDS, default=DEFAULT_KIND),
        arg("--label", metavar="TEXT"),
        one_of(arg("--scope", choices=[VAULT_PLAZA_SCOPE], help="every node of the plaza (the default)"),
               arg("--nodes", metavar="n1,n2", help="only these nodes")),
        arg("--bind", action="append", default=[], metavar="B", help="a consumer that may read it (repeat, or a,b)"))),
    Action("rm", "delete an entry (its name is not imported again)", "DELETE", "/v1/vault/secrets/{id}",
           args=(arg("id", metavar="ID"),),
           confirm=lambda a: f"Delete vault entry {a.id}? Its values are destroyed.",
           render=lambda d: f"deleted {d['deleted']} "
                            f"(versions {', '.join(map(str, d['destroyed_versions']))} destroyed)"),
    Action("import", "import a .env file (discouraged)", run=import_file, args=(
        arg("file", metavar="FILE"),
        arg("--nodes", metavar="n1,n2", help="only these nodes (default: plaza-wide)"),
        arg("--bind", action="append", default=[], metavar="NAME=B", help="bind a key to a consumer"),
        arg("--shred", action="store_true", help="zero and delete the file when every key was imported"))),
    Action("audit", "read the audit log", run=audit, args=(
        arg("--verify", action="store_true", help="check the MAC chain (exits 1 when it is broken)"),
        arg("--offline", action="store_true", help="with --verify: read the file directly, not through the hub"),
        arg("--after", type=int, default=0, metavar="N", help="lines after line N"),
        arg("--limit", type=int, default=100, metavar="N", help=f"at most N lines (1 to {AUDIT_MAX_LIMIT})"))),
    Action("recovery", "make a new recovery code and show it once", "POST", "/v1/vault/recovery",
           render=lambda d: f"recovery code (shown once; a new code replaces the old one):\n\n  {d['code']}\n"),
    Action("rekey", "replace the master key (asks for each slot's secret but the key file's)", run=rekey),
))
