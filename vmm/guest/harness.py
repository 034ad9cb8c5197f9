#!/usr/bin/python3
"""The agent harness: the program in the guest that runs the agent's loop.

It talks only over the channel (``/run/apz/channel.sock``, service ``harness``), one JSON object a
line, request then answer. It holds no key and no role: the hub says who the agent is. The loop:

1. ``hello`` (the hub answers with the agent's cid, role, name and the tools it is offered);
2. ``next``: wait for a work item;
3. ``model``: ask the model (the hub's gateway) what to do, with the conversation so far;
4. for each tool the model picks: a guest tool (``vm.*``) is first ``decide``d by the hub's laws,
   then run here and its ``result`` reported; a host tool goes to the hub as ``tool``;
5. repeat 3-4 until the model answers without a tool, then ``done``.

Guest tools: ``vm.shell`` (a command with a time limit), ``vm.read_file``, ``vm.list_dir``,
``vm.write_file``, ``vm.edit_file`` (confined to the workspace), ``vm.share_file`` (sends a workspace
file to the hub). Outbound web traffic goes through a local proxy at 127.0.0.1:3128 that carries each
connection to the hub's egress proxy (service ``egress``).

Standard library only; it never imports anything of the hub. What it shares with the hub (ops,
limits, the error shape, the services) is ``contract.py``, beside it in the image.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time

if __package__:  # imported from the hub's tree (vmm.guest.harness)
    from . import contract
else:  # run in the guest, where contract.py sits beside this file
    import contract

SHELL_TIMEOUT_S, SHELL_MAX_TIMEOUT_S = contract.SHELL_TIMEOUT_S, contract.SHELL_MAX_TIMEOUT_S
MAX_OUTPUT, MAX_FILE = contract.MAX_OUTPUT, contract.MAX_FILE
PLACEHOLDER_KEY = contract.PLACEHOLDER_KEY
CHANNEL_SOCK = os.environ.get("APZ_CHANNEL_SOCK", contract.CHANNEL_SOCK)
WORKSPACE = os.environ.get("APZ_WORKSPACE", "/workspace")
PROXY_PORT = 3128
#: Model turns per work item before the harness gives up on it.
MAX_STEPS = 24
#: How long one ``next`` asks the hub to wait for work (at most the contract's MAX_NEXT_WAIT_S).
WAIT_S = 20


class ToolError(Exception):
    pass


class ItemCancelled(Exception):
    """The hub cancelled the work item (STOP ALL): stop it now."""


def log(msg: str) -> None:
    print(f"apz-harness: {msg}", flush=True)


# -- the channel ------------------------------------------------------------------------------------
def open_service(service: str, path: str = CHANNEL_SOCK) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(service.encode() + b"\n")
    return s


class Hub:
    """The harness's line to the hub: one JSON request, one JSON answer."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.lock = threading.Lock()

    def call(self, op: str, **fields) -> dict:
        with self.lock:
            self.sock.sendall(json.dumps(dict(fields, op=op)).encode() + b"\n")
            line = self.rfile.readline()
        if not line:
            raise ConnectionError("the hub closed the harness stream")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# -- guest tools ------------------------------------------------------------------------------------
def confined(path: str, workspace: str = None) -> str:
    """The real path of ``path`` inside the workspace; refused if it leaves it."""
    ws = os.path.realpath(workspace or WORKSPACE)
    if not isinstance(path, str) or not path:
        raise ToolError("a path is needed")
    full = os.path.realpath(os.path.join(ws, path))
    if full != ws and not full.startswith(ws + os.sep):
        raise ToolError(f"{path} is outside {workspace or WORKSPACE}")
    return full


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + f"\n… ({len(text) - MAX_OUTPUT} more characters)"


#: Who the agent's commits name: its name and CID, set once the hub answers hello (``git_identity``).
GIT_IDENTITY: dict[str, str] = {}


def git_identity(name: str, cid) -> None:
    email = f"agent-{cid}@agents.plaza.invalid"
    GIT_IDENTITY.update({"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
                         "GIT_COMMITTER_EMAIL": email})


def shell_env() -> dict:
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": WORKSPACE,
            "LANG": "C.UTF-8", "http_proxy": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy,
            "HTTPS_PROXY": proxy, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost",
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY, "OPENAI_API_KEY": PLACEHOLDER_KEY, **GIT_IDENTITY}


def tool_shell(args: dict, workspace: str = None) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("vm.shell needs a command")
    timeout = args.get("timeout", SHELL_TIMEOUT_S)
    if not isinstance(timeout, (int, float)) or not 0 < timeout <= SHELL_MAX_TIMEOUT_S:
        raise ToolError(f"timeout is 1 to {SHELL_MAX_TIMEOUT_S} seconds")
    ws = workspace or WORKSPACE
    try:
        p = subprocess.run(["/bin/sh", "-c", command], cwd=ws, env=shell_env(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           start_new_session=True)
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace")
        raise ToolError(f"timed out after {timeout} s\n{_clip(out)}") from None
    return f"exit {p.returncode}\n" + _clip(p.stdout.decode(errors="replace"))


def tool_read_file(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path"), workspace)
    if not os.path.isfile(full):
        raise ToolError(f"no file {args.get('path')}")
    with open(full, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ToolError(f"{args.get('path')} is larger than {MAX_FILE} bytes")
    return _clip(data.decode(errors="replace"))


def tool_list_dir(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path") or ".", workspace)
    if not os.path.isdir(full):
        raise ToolError(f"no folder {args.get('path')}")
    names = sorted(n + ("/" if os.path.isdir(os.path.join(full, n)) else "") for n in os.listdir(full))
    return "\n".join(names)


def tool_write_file(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path"), workspace)
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("vm.write_file needs content")
    if len(content.encode()) > MAX_FILE:
        raise ToolError(f"a file is at most {MAX_FILE} bytes")
    os.makedirs(os.path.dirname(full), exist_ok=True)
    tmp = full + ".apz-tmp"
    with open(tmp, "w") as f:
        f.write(content)
    os.replace(tmp, full)
    return f"wrote {len(content.encode())} bytes to {args['path']}"


def tool_edit_file(args: dict, workspace: str = None) -> str:
    full = confined(args.get("path"), workspace)
    old, new = args.get("old"), args.get("new")
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        raise ToolError("vm.edit_file needs old and new text")
    if not os.path.isfile(full):
        raise ToolError(f"no file {args.get('path')}")
    with open(full) as f:
        text = f.read()
    n = text.count(old)
    if n != 1:
        raise ToolError(f"the old text occurs {n} times; it must occur exactly once")
    return tool_write_file({"path": args["path"], "content": text.replace(old, new)}, workspace)


def tool_share_file(args: dict, workspace: str = None, hub: Hub = None) -> str:
    full = confined(args.get("path"), workspace)
    if not os.path.isfile(full):
        raise ToolError(f"no file {args.get('path')}")
    with open(full, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ToolError(f"a shared file is at most {MAX_FILE} bytes")
    if hub is None:
        raise ToolError("no hub to share with")
    r = hub.call("share", path=args["path"], content=base64.b64encode(data).decode())
    err = contract.error_of(r)
    if err is not None:
        raise ToolError(err["message"] or "the hub refused the file")
    return f"shared {args['path']} ({len(data)} bytes) as {r.get('name')}"


GUEST_TOOLS = {"vm.shell": tool_shell, "vm.read_file": tool_read_file, "vm.list_dir": tool_list_dir,
               "vm.write_file": tool_write_file, "vm.edit_file": tool_edit_file}


def run_guest_tool(tool: str, args: dict, hub: Hub = None, workspace: str = None) -> str:
    if tool == "vm.share_file":
        return tool_share_file(args, workspace, hub)
    fn = GUEST_TOOLS.get(tool)
    if fn is None:
        raise ToolError(f"no guest tool {tool}")
    return fn(args, workspace)


# -- the egress forwarder ---------------------------------------------------------------------------
def splice(a: socket.socket, b: socket.socket) -> None:
    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()
    a.close()
    b.close()


def forwarder(port: int = PROXY_PORT, service: str = "egress") -> None:
    """127.0.0.1:port in the guest: every connection goes, as it is, to the hub's ``service`` (the egress
    proxy; the git server on ``contract.GIT_PORT``)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)

    def serve():
        while True:
            conn, _ = srv.accept()
            try:
                up = open_service(service)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=splice, args=(conn, up), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


# -- the loop ---------------------------------------------------------------------------------------
def run_item(hub: Hub, item: dict, tools: list) -> None:
    try:
        _run_item(hub, item, tools)
    except ItemCancelled as e:
        log(f"item {item.get('item')} cancelled: {e}")
        hub.call("done", item=item["item"], outcome="cancelled", text=str(e))


def _checked(r: dict) -> dict:
    err = contract.error_of(r)
    if err is not None and err["code"] == contract.ITEM_CANCELLED:
        raise ItemCancelled(err["message"] or "cancelled")
    return r


def _run_item(hub: Hub, item: dict, tools: list) -> None:
    messages = [{"role": "user", "content": item.get("text", "")}]
    for _ in range(MAX_STEPS):
        r = _checked(hub.call("model", item=item["item"], messages=messages, tools=tools))
        err = contract.error_of(r)
        if err is not None:
            hub.call("done", item=item["item"], outcome="cancelled" if err["code"] in contract.CANCELLING else "failed",
                     text=err["message"] or "the model call failed")
            return
        reply = r.get("reply") or {}
        calls = reply.get("tool_calls") or []
        messages.append({"role": "assistant", "content": reply.get("text") or "", "tool_calls": calls})
        if not calls:
            hub.call("done", item=item["item"], outcome="done", text=reply.get("text") or "")
            return
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": do_call(hub, call)})
    hub.call("done", item=item["item"], outcome="failed", text=f"gave up after {MAX_STEPS} model turns")


def do_call(hub: Hub, call: dict) -> str:
    tool, args, cid = call.get("name"), call.get("args") or {}, call.get("id")
    if not isinstance(tool, str) or not isinstance(args, dict):
        return "error: a tool call needs a name and arguments"
    if tool.startswith("vm."):
        d = _checked(hub.call("decide", tool=tool, args=args, call_id=cid))
        if d.get("effect") == "ask":
            return f"waiting: {d.get('message')}"
        if d.get("effect") != "allow":
            return f"error: refused by the plaza: {d.get('message') or d.get('reason')}"
        try:
            out, ok = run_guest_tool(tool, args, hub), True
        except ToolError as e:
            out, ok = f"error: {e}", False
        except Exception as e:  # a tool must never take the harness down
            out, ok = f"error: {type(e).__name__}: {e}", False
        _checked(hub.call("result", tool=tool, call_id=cid, ok=ok, output=out))
        return out
    r = _checked(hub.call("tool", tool=tool, args=args, call_id=cid))
    err = contract.error_of(r)
    if err is not None:
        if err["code"] == contract.AWAITING_APPROVAL:
            return "waiting: " + err["message"]
        return "error: " + (err["message"] or "refused")
    return json.dumps(r.get("result"))


def name_self(hub: Hub, prompt: str) -> str | None:
    """The plaza asks a new agent to name itself, once: the model answers, the hub keeps the name in it
    (or gives the agent role-cid when the answer holds none, or the call failed)."""
    r = hub.call("model", purpose="name", messages=[{"role": "user", "content": prompt}], tools=[])
    answer = (r.get("reply") or {}).get("text") if contract.error_of(r) is None else ""
    named = hub.call("name", name=answer or "")
    err = contract.error_of(named)
    log(f"named {named.get('name')}" if err is None else f"not named: {err['message']}")
    return named.get("name") if err is None else None


def main() -> int:
    os.makedirs(WORKSPACE, exist_ok=True)
    for port, service in ((PROXY_PORT, "egress"), (contract.GIT_PORT, "git")):
        try:
            forwarder(port, service)
        except OSError as e:
            log(f"no {service} forwarder: {e}")
    backoff = 0.5
    while True:
        try:
            hub = Hub(open_service("harness"))
            me = hub.call("hello", version=1)
            refused = contract.error_of(me)
            if refused is not None:
                log(f"the hub refused us: {refused['code']}: {refused['message']}")
                hub.close()
                time.sleep(5)
                continue
            backoff = 0.5
            log(f"connected as cid {me['cid']} ({me['role']})")
            git_identity(me.get("name") or f"{me['role']}-{me['cid']}", me["cid"])
            if me.get("name_prompt"):
                git_identity(name_self(hub, me["name_prompt"]) or f"{me['role']}-{me['cid']}", me["cid"])
            tools = me.get("tools") or []
            while True:
                r = hub.call("next", wait=WAIT_S)
                if r.get("item"):
                    run_item(hub, r["item"], tools)
        except (OSError, ConnectionError, ValueError) as e:
            log(f"lost the hub: {e}; again in {backoff:g} s")
            time.sleep(backoff)
            backoff = min(backoff * 2, 10)


if __name__ == "__main__":
    sys.exit(main())
