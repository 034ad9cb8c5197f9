"""The terminal screen itself: prompt-toolkit, full screen, live over ``/v1/ws``.

It carries out what the state (``tui/model.py``) asks: each ``Load`` is one GET per resource, each
``Send`` one write, both through the command line's client (HTTP only, one request at a time on a
worker thread so the screen never waits on the hub); the live bus (subprotocol ``apz.events.v1``,
read-only) tells the state which resources an event made stale, and the tab on screen reloads
them, so a number follows the plaza without ``r``. A lost socket reconnects after 1 s, doubling to
30 s, and reads the tab again when it is back (the events it missed are in what it reads).
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.output import ColorDepth
from prompt_toolkit.styles import Style

from ...wire import CLOSE_IDLE, WS_SUBPROTOCOL
from ..client import Client, HubError
from ..commands.events import RECONNECT_FIRST_S, next_wait
from . import model as state
from . import views

#: How long an Escape waits to be told apart from the start of an arrow key's sequence.
ESCAPE_WAIT_S = 0.05
#: prompt-toolkit's names of the keys the state knows by another name.
KEY_NAMES = {"c-i": "tab", "c-m": "enter", "c-j": "enter", "c-h": "backspace", "s-tab": "s-tab", "up": "up",
             "down": "down", "escape": "escape", "c-c": "c-c", "backspace": "backspace"}

STYLE = Style.from_dict({
    "tab": "", "tab.current": "reverse bold", "banner": "bg:ansired fg:ansiwhite bold",
    "header": "bold", "selected": "reverse", "label": "fg:ansicyan", "hint": "fg:ansibrightblack",
    "status": "reverse", "live": "reverse fg:ansigreen", "prompt": "bold fg:ansiyellow", "error": "fg:ansired",
    "idle": "fg:ansigreen", "working": "fg:ansiyellow bold", "asleep": "fg:ansiblue", "offline": "fg:ansibrightblack",
    "name": "bold",
})


def wants_colour(output: Any) -> bool:
    """Colours, unless NO_COLOR is set, the terminal is dumb, or it draws in one bit."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return output.get_default_color_depth() != ColorDepth.DEPTH_1_BIT


class Screen:
    def __init__(self, client: Client, input: Any = None, output: Any = None, colour: bool | None = None):
        self.client = client
        self.model = state.Model()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apz-tui")
        self.loading: dict[str, bool] = {}  # resource -> load it again when this load ends
        self.last_text = ""
        self.app: Application = Application(
            layout=Layout(Window(FormattedTextControl(self._fragments, focusable=True, show_cursor=False),
                                 wrap_lines=False, always_hide_cursor=True)),
            key_bindings=self._keys(), full_screen=True, style=STYLE, input=input, output=output,
            mouse_support=False)
        self.app.ttimeoutlen = ESCAPE_WAIT_S
        self.app.timeoutlen = ESCAPE_WAIT_S
        self.colour = wants_colour(self.app.output) if colour is None else colour

    # -- drawing ------------------------------------------------------------------------------

    def _fragments(self) -> list[tuple[str, str]]:
        size = self.app.output.get_size()
        lines = views.screen(self.model, size.columns, size.rows, self.colour)
        self.last_text = views.text(lines)
        out: list[tuple[str, str]] = []
        for i, line in enumerate(lines):
            out += line
            if i < len(lines) - 1:
                out.append(("", "\n"))
        return out

    # -- keys ---------------------------------------------------------------------------------

    def _keys(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add(Keys.Any)
        def _(event) -> None:
            pressed = event.key_sequence[0]
            name = KEY_NAMES.get(str(pressed.key.value if isinstance(pressed.key, Keys) else pressed.key))
            data = pressed.data if isinstance(pressed.data, str) else ""
            self.press(name or data, data)

        return kb

    def press(self, name: str, text: str = "") -> None:
        self.carry_out(state.key(self.model, name, text))
        self.app.invalidate()

    # -- effects ------------------------------------------------------------------------------

    def carry_out(self, effects: list) -> None:
        for e in effects:
            if isinstance(e, state.Quit):
                if self.app.is_running and not self.app.future.done():
                    self.app.exit()
            elif isinstance(e, state.Load):
                for r in e.resources:
                    if r in self.loading:
                        self.loading[r] = True
                    else:
                        self.loading[r] = False
                        self.app.create_background_task(self._load(r))
            elif isinstance(e, state.Send):
                self.app.create_background_task(self._send(e))

    async def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        loop = asyncio.get_running_loop()
        kwargs = {"json": body} if body is not None else {}
        return await loop.run_in_executor(self.pool, lambda: self.client.request(method, path, **kwargs))

    async def _load(self, resource: str) -> None:
        try:
            while True:
                try:
                    self.model.loaded(resource, await self._call("GET", state.route_of(resource)))
                except HubError as e:
                    self.model.failed(resource, e.message + (f" ({e.code})" if e.code else ""))
                self.app.invalidate()
                if not self.loading.get(resource):
                    break
                self.loading[resource] = False
        finally:
            self.loading.pop(resource, None)

    async def _send(self, effect: state.Send) -> None:
        try:
            answer = await self._call(effect.method, effect.path, effect.body)
        except HubError as e:
            state.refused(self.model, effect, e.message + (f" ({e.code})" if e.code else ""))
        else:
            self.carry_out(state.sent(self.model, effect, answer))
        self.app.invalidate()

    # -- the live bus -------------------------------------------------------------------------

    async def _live(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

        url = self.client.ws_url("/v1/ws")
        headers = {"Authorization": f"Bearer {self.client.token}"} if self.client.token else {}
        wait = RECONNECT_FIRST_S
        while True:
            try:
                async with connect(url, subprotocols=[WS_SUBPROTOCOL], additional_headers=headers,
                                   open_timeout=10) as ws:
                    self.model.live, wait = "live", RECONNECT_FIRST_S
                    self.carry_out([state.Load(self.model.needs())])  # what passed while it was away
                    self.app.invalidate()
                    async for raw in ws:
                        self.carry_out(state.event(self.model, json.loads(raw)))
                        self.app.invalidate()
            except ConnectionClosed as e:
                if e.rcvd is not None and e.rcvd.code == CLOSE_IDLE:  # a quiet stream: go on at once
                    continue
            except (TimeoutError, OSError, InvalidHandshake, InvalidStatus):
                pass
            self.model.live = f"reconnecting in {wait:g} s"
            self.app.invalidate()
            await asyncio.sleep(wait)
            wait = next_wait(wait)

    def _start(self) -> None:
        self.app.create_background_task(self._live())
        self.carry_out([state.Load(self.model.needs())])

    def run(self) -> int:
        try:
            self.app.run(pre_run=self._start, handle_sigint=False)
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)
        return 0
