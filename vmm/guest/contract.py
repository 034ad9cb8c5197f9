"""The guest contract: what the in-guest harness and the hub agree on, in one place.

Standard library only, and nothing of the hub: the guest image carries this file beside
``harness.py`` and ``channeld.py`` (``/opt/apz/contract.py``); the hub imports it as
``vmm.guest.contract``. A change here is a change on both sides at once (the image's recipe hashes
this file, so a new one is built on first need).

- **Services** a guest program may open towards the hub (``SERVICES``); the node resets any other.
- **The harness protocol**: one JSON request a line (``{"op": ..., ...}``), one JSON answer a line.
  The ops are ``OPS``; those made inside a work item are ``ITEM_OPS`` (refused once the item was
  cancelled). An answer is the op's fields; a refusal is the hub's HTTP error shape,
  ``{"error": {"code": ..., "message": ...}}`` (``error``), with more fields beside ``error`` where
  an op says so (``item`` for ``item_cancelled``, ``approval`` for ``awaiting_approval``). The node
  daemon answers the hub in the same shape.
- **Limits** both sides hold: the guest tools' (shell time, output, file size: the 1 MiB a file read,
  written or shared may be) and the channel's (the longest request line, the longest ``next`` wait).
"""

from __future__ import annotations

import os
import sys

#: The services a guest may open towards the hub (through channeld); anything else is reset at the node.
SERVICES = ("harness", "egress", "gateway", "git")
#: In the guest: the port the harness forwards, as it is, to the hub's git server (service ``git``), so the
#: guest's git clones and pushes http://127.0.0.1:GIT_PORT/git/NAME.git with no password or token.
GIT_PORT = 9080
#: In the guest: the unix socket a program connects to, writing the service it wants on the first line.
CHANNEL_SOCK = "/run/apz/channel.sock"
#: The only "key" a guest ever holds: the gateway takes it in place of a provider's key.
PLACEHOLDER_KEY = "plaza"

#: The harness's requests, in the order of its loop.
OPS = ("hello", "name", "next", "model", "decide", "result", "tool", "share", "done")
#: The requests a harness makes inside a work item (refused once the item was cancelled).
ITEM_OPS = ("model", "decide", "result", "tool", "share")

#: Model turns a work item may take unless the hub allows more, and the most it may allow in all.
MAX_TURNS, MAX_TURNS_ALLOWED = 24, 2000
#: What the hub may add to a ``model`` answer to change the item in progress (an editor's slash commands):
#: the conversation to carry on with (``/steer`` adds a note, ``/compress`` summarises it) and how many
#: more model turns the item may take (``/extend-turns``). The harness adopts both before the reply.
CONVERSATION, MORE_TURNS = "conversation", "more_turns"

#: Shell commands: default and largest time limit, in seconds.
SHELL_TIMEOUT_S, SHELL_MAX_TIMEOUT_S = 30, 600
#: Largest output a guest tool returns, in characters.
MAX_OUTPUT = 16_000
#: Largest file a guest tool reads or writes, and largest file an agent shares with the hub, in bytes.
MAX_FILE = 1 << 20
#: The web tools (``vm.fetch``, ``vm.download``, ``vm.install``): the most of a page ``vm.fetch`` reads, the
#: largest file ``vm.download`` saves, the redirects either follows, and their time limits, in seconds.
FETCH_MAX_BYTES = 2 << 20
DOWNLOAD_MAX_BYTES = 64 << 20
MAX_REDIRECTS = 5
FETCH_TIMEOUT_S = 30
INSTALL_TIMEOUT_S, INSTALL_MAX_PACKAGES = 600, 20
#: The package managers ``vm.install`` drives: pip (into the agent's user site, under /workspace), and the
#: guest's own (apt, as root); both reach their index only through the egress proxy.
INSTALL_MANAGERS = ("pip", "apt")
#: A package as ``vm.install`` takes it: a name, maybe extras and one version clause; never an option.
PACKAGE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}(\[[A-Za-z0-9,._-]{1,100}\])?((==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]{1,60})?"
#: What a web tool's ``result`` may tell the hub beside its output, for the transcript.
RESULT_META = ("url", "host", "status", "content_type", "bytes", "ms", "sha256", "path", "manager", "packages")
#: The longest request line a harness sends (a shared file, base64, fits); a longer one resets the stream.
LINE_BYTES_MAX = 4 << 20
#: The longest a harness's ``next`` waits for work before it asks again, in seconds.
MAX_NEXT_WAIT_S = 30.0

#: The codes a harness acts on.
ITEM_CANCELLED = "item_cancelled"
#: channeld's answer to a harness whose hub connection a restore ended (a fork, wake, rollback or recovery
#: carried it over to a new host): it connects again at once (``Restored``), not after its back-off.
GUEST_RESTORED = "guest_restored"
AWAITING_APPROVAL = "awaiting_approval"
PLAZA_HELD = "plaza_held"
BUDGET_EXHAUSTED = "budget_exhausted"
#: A model call refused with one of these ends the item as cancelled (STOP ALL; the task's escrow is spent).
CANCELLING = (PLAZA_HELD, BUDGET_EXHAUSTED)


def error(code: str, message: str, **more) -> dict:
    """A refusal, in the hub's HTTP error shape (with any more fields an op gives beside it)."""
    return {"error": {"code": code, "message": message}, **more}


def error_of(answer: object) -> dict | None:
    """The refusal in an answer ({code, message}), or None when the answer is not one."""
    if not isinstance(answer, dict):
        return {"code": "bad_answer", "message": "the answer is not a JSON object"}
    err = answer.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return {"code": str(err.get("code") or "error"), "message": str(err.get("message") or "")}
    return {"code": "error", "message": str(err)}


class Restored(ConnectionError):
    """The guest was restored under a new host: the harness's connection to the old one is gone."""


def answer(line: bytes) -> dict:
    """A harness's answer line, decoded; ``Restored`` for channeld's ``GUEST_RESTORED``."""
    import json  # noqa: PLC0415 - not at import: channeld imports this module, and json's import is slow in a guest

    got = json.loads(line)
    err = error_of(got)
    if err is not None and err["code"] == GUEST_RESTORED:
        raise Restored(err["message"])
    return got


#: In the harness's environment when the node starts it held (parked) in a guest saved as a warm template.
#: channeld sets its value to the number of a pipe the program closes once it waits (see ``unparked``).
PARK_ENV = "APZ_HARNESS_PARKED"


def unparked() -> None:
    """With ``PARK_ENV`` set (then taken out of the environment), a parked harness waits here, started
    and imported, until channeld closes its stdin (the node's ``unpark``, in each copy restored from the
    template). First it closes the pipe ``PARK_ENV`` names: channeld answers the park, and the template
    is saved, only then, so that a copy resumes here and not halfway through its imports. Each copy
    then draws its own randomness: the pool channeld reseeded at the restore, not the state the
    template was saved with. Without it, returns at once."""
    ready = os.environ.pop(PARK_ENV, None)
    if not ready:
        return
    if ready.isdigit() and int(ready) > 2:   # never a standard stream (a "1" not set by channeld)
        try:
            os.close(int(ready))
        except OSError:
            pass
    while sys.stdin.buffer.read(4096):
        pass
    reseed()


def reseed() -> None:
    """Whatever random state this process drew before it was copied, drawn again from the kernel's pool
    (reseeded by channeld at the restore): the random module, tempfile's names (their generator is
    remade only when the pid changes, and a copy keeps its pid), OpenSSL's generator (reseeded on a
    fork, not on a copy). The string hash secret cannot be changed in a running process: a parked
    program shares it with its siblings (see docs/vmm.md)."""
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed()
    tf = sys.modules.get("tempfile")
    if tf is not None:
        tf._name_sequence = None
    ssl = sys.modules.get("ssl")
    if ssl is not None:
        ssl.RAND_add(os.urandom(48), 48.0)
