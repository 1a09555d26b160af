"""The extension-host actor in-process, over a socketpair, with the coordinator's hooks:
tools running concurrently in the host, the hook timeout, ctx.ui without a UI."""

from __future__ import annotations

import socket
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_actors.actors._extension_hooks import ExtensionHooks
from pi_actors.actors._relink import PeerSlot
from pi_actors.actors.extension_host import run_extension_host
from pi_actors.protocol import extension_host as X
from pi_actors.runtime import RemoteError, call_method, open_method


def _ext(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return str(path)


# -- the host actor, in-process over a socketpair ---------------------------------------------


class _Coordinator:
    """What ExtensionHooks uses of the coordinator: its log, its session events and who
    listens to them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.log = self
        # A UI follows the session (a subscriber), no prompt is running.
        self._subscribers: list[Any] = [object()]
        self._sink: Any = None
        self._sink_quiet = False

    def event(self, *args: Any, **kw: Any) -> None:
        pass

    async def _emit_session_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)


@asynccontextmanager
async def _host(specs: list[str], cwd: str, hook_timeout: float = 30.0):
    ours, theirs = socket.socketpair()
    config = {"specs": specs, "hookTimeout": hook_timeout}
    hooks = ExtensionHooks(None, X.ExtensionHostConfig(specs=specs, hook_timeout=hook_timeout))
    slot = hooks.slot = PeerSlot("extensions", "extension host", "extension call", supervised=False,
                                 interface=X.EXTENSION_HOST, handler=hooks.handler())  # fmt: skip
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_extension_host, {"coordinator": trio.SocketStream(trio.socket.from_stdlib_socket(theirs))}, config)
        await slot.hold(nursery, trio.SocketStream(trio.socket.from_stdlib_socket(ours)))
        hooks.coordinator = _Coordinator()
        hooks.registry = await call_method(slot, X.DESCRIBE)
        yield hooks
        nursery.cancel_scope.cancel()


async def test_extension_tools_run_concurrently_in_the_host(tmp_path):
    path = _ext(tmp_path, "pair", (
        "import trio\n"
        "seen = {}\n"
        "def register(pi):\n"
        "    async def execute(call_id, params, signal, on_update, ctx):\n"
        "        seen.setdefault(params['me'], trio.Event()).set()\n"
        "        other = seen.setdefault(params['other'], trio.Event())\n"
        "        await other.wait()  # each call finishes only once the other has started\n"
        "        await on_update({'content': 'waited'})\n"
        "        return 'done ' + params['me']\n"
        "    pi.register_tool('pair', execute=execute)\n"
    ))  # fmt: skip
    results: dict[str, Any] = {}
    updates: list[Any] = []
    with trio.fail_after(30):
        async with _host([path], str(tmp_path)) as hooks:

            async def run(me: str, other: str) -> None:
                args = X.ExtToolArgs(tool_call_id=me, name="pair", args={"me": me, "other": other})
                async with open_method(hooks.slot, X.RUN_TOOL, args) as call:
                    async for update in call:
                        updates.append(update)
                    results[me] = await call.result()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "a", "b")
                nursery.start_soon(run, "b", "a")
    assert {k: v.content[0].text for k, v in results.items()} == {"a": "done a", "b": "done b"}  # type: ignore[union-attr]
    assert len(updates) == 2


async def test_a_slow_hook_is_cut_off_by_the_timeout_and_reported_and_the_host_still_answers(tmp_path):
    path = _ext(tmp_path, "slow", (
        "import trio\n"
        "def register(pi):\n"
        "    async def stuck(event, ctx):\n"
        "        if event['text'] == 'hang':\n"
        "            await trio.sleep_forever()\n"
        "        return {'action': 'transform', 'text': 'fine'}\n"
        "    pi.on('input', stuck)\n"
    ))  # fmt: skip
    with trio.fail_after(30):
        async with _host([path], str(tmp_path), hook_timeout=0.2) as hooks:
            assert await hooks.emit("input", {"text": "hang"}) is None
            assert hooks.coordinator.events == [
                {"type": "extension_error", "extensionPath": "", "event": "input", "error": "the input handlers did not finish within 0.2 s"}
            ]
            assert await hooks.emit("input", {"text": "ok"}) == {"action": "transform", "text": "fine"}


async def test_ctx_ui_without_a_ui_gets_the_default_answer_and_notify_is_still_shown(tmp_path):
    path = _ext(tmp_path, "asks", (
        "def register(pi):\n"
        "    async def ask(event, ctx):\n"
        "        await ctx.ui.notify('checking')\n"
        "        ok = await ctx.ui.confirm('Sure?', 'really')\n"
        "        choice = await ctx.ui.select('Pick', ['a', 'b'])\n"
        "        return {'action': 'transform', 'text': f'{ok} {choice}'}\n"
        "    pi.on('input', ask)\n"
    ))  # fmt: skip
    with trio.fail_after(30):
        async with _host([path], str(tmp_path)) as hooks:
            assert await hooks.emit("input", {"text": "x"}) == {"action": "transform", "text": "False None"}
            [notify] = hooks.coordinator.events
            assert notify["method"] == "notify" and notify["message"] == "checking" and notify["type"] == "extension_ui_request"


async def test_an_answer_to_no_waiting_ui_request_is_refused():
    hooks = ExtensionHooks(None, X.ExtensionHostConfig(has_ui=True))
    with pytest.raises(RemoteError, match="no extension UI request 'nope' is waiting"):
        hooks.answer("nope", X.UiAnswer(confirmed=True))
