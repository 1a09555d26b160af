"""Extensions in sessions hosted by a real ``pi-actors serve`` process: loaded from serve's
``-e``, their ``ctx.ui`` requests reach every attached client (the first answer wins; with
no client attached, no UI's default answer), their custom messages reach every client, and
their failures are one-line ``extension_error`` events while the session goes on."""

from __future__ import annotations

import subprocess

import trio
from conftest import CLI
from support.wire import Lines

from pi_actors.runtime import RemoteError
from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply

ASK = (
    "import trio\n"
    "START = []\n"
    "def register(pi):\n"
    "    async def on_start(event, ctx):\n"
    "        START.append(await ctx.ui.confirm('Nobody is attached yet', 'start?'))\n"
    "    async def ask(args, ctx):\n"
    "        ok = await ctx.ui.confirm('Proceed?', args)\n"
    "        await pi.send_message({'customType': 'answer', 'content': f'start={START} ask={ok}'})\n"
    "    async def on_input(event, ctx):\n"
    "        if event['text'] == 'hang':\n"
    "            await trio.sleep_forever()\n"
    "    def on_turn_end(event, ctx):\n"
    "        raise ValueError('turn_end handler broke')\n"
    "    pi.on('session_start', on_start)\n"
    "    pi.on('turn_end', on_turn_end)\n"
    "    pi.on('input', on_input)\n"
    "    pi.register_command('ask', description='Ask the user', handler=ask)\n"
)


class _Events:
    """One client's subscription: every event so far (``seen``), in order."""

    def __init__(self, session: RemoteSession) -> None:
        self.session = session
        self.seen: list[dict] = []
        self.changed = trio.Event()

    async def follow(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with self.session.open_call("subscribe") as sub:
            started = False
            async for chunk in sub:
                if not started:
                    task_status.started()
                    started = True
                if isinstance(chunk, dict) and "event" in chunk:
                    self.seen.append(chunk["event"])
                    self.changed.set()
                    self.changed = trio.Event()

    async def until(self, type_: str, pred=lambda e: True) -> dict:
        """The first event so far or to come of ``type_`` that ``pred`` accepts."""
        while True:
            found = [e for e in self.seen if e.get("type") == type_ and pred(e)]
            if found:
                return found[0]
            await self.changed.wait()


async def test_a_served_session_loads_serves_extensions_and_forwards_ctx_ui_to_the_attached_clients(scripted, env, tmp_path, pane):
    (env.work / "ask.py").write_text(ASK)
    (env.work / "broken.py").write_text("def register(pi):\n    raise RuntimeError('boom at load')\n")
    sock = tmp_path / "run" / "s.sock"
    scripted.script += [Reply(text="served answer")]
    env.env["PI_ACTORS_EXTENSION_HOOK_TIMEOUT"] = "3"
    proc = await trio.lowlevel.open_process(
        [CLI, "serve", "--unix", str(sock), "--model", "scripted/scripted-model", "--no-session", "--sandbox", "off",
         "-e", "ask.py", "-e", "broken.py"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    try:
        with trio.fail_after(120):  # a safety net: the steps wait for events
            out = Lines(proc.stdout)
            await out.next()  # the admin token file
            await out.next()  # listening: unix:...
            async with connect(str(sock)) as a, connect(str(sock)) as b, trio.open_nursery() as nursery:
                sid = (await a.call("create", {}))["sessionId"]
                one, two = await RemoteSession.attach(a, sid), await RemoteSession.attach(b, sid)
                events_one, events_two = _Events(one), _Events(two)
                await nursery.start(events_one.follow)
                await nursery.start(events_two.follow)
                nursery.start_soon(one.call, "prompt", {"text": "/ask really?", "events": False})
                # Both clients are asked; the first answer wins, the second is refused.
                asked = await events_one.until("extension_ui_request")
                assert (asked["method"], asked["title"], asked["message"]) == ("confirm", "Proceed?", "really?")
                assert (await events_two.until("extension_ui_request"))["id"] == asked["id"]
                await two.call("extension_ui_response", {"id": asked["id"], "confirmed": True})
                try:
                    await one.call("extension_ui_response", {"id": asked["id"], "confirmed": False})
                except RemoteError as exc:
                    assert exc.code == "not_found"
                else:
                    raise AssertionError("a second answer to the same request was accepted")
                # The load error is told to the clients; the command's custom message reaches both:
                # at start-up nobody was attached, so the session_start confirm got no UI's answer.
                error = await events_one.until("extension_error")
                assert (error["event"], error["error"]) == ("load", "register failed: RuntimeError: boom at load")
                assert error["extensionPath"] == str(env.work / "broken.py")
                for events in (events_one, events_two):
                    shown = await events.until("message_end", lambda e: e["message"]["role"] == "custom")
                    assert shown["message"]["content"] == "start=[False] ask=True"
                # A handler that hangs is cut off by the timeout and one that raises is one line;
                # the session goes on and answers.
                nursery.start_soon(one.call, "prompt", {"text": "hang", "events": False})
                errors = [await events_two.until("extension_error", lambda e, name=name: e["event"] == name) for name in ("input", "turn_end")]
                assert [e["error"] for e in errors] == ["the input handlers did not finish within 3 s", "ValueError: turn_end handler broke"]
                end = await events_two.until("agent_end")
                assert end["messages"][-1]["content"][0]["text"] == "served answer"
                # The TUI of `pi-actors attach` answers a question in its live area.
                await pane.start_argv([CLI, "attach", f"unix:{sock}", "--session", sid], ready="(scripted) scripted-model")
                await pane.type("/ask from the terminal?")
                await pane.keys("Enter")
                await pane.wait_for("Proceed?", "from the terminal?")
                await pane.keys("Down", "Enter")  # No (the earlier answer over the wire was yes)
                await pane.wait_for("ask=False")
                nursery.cancel_scope.cancel()
    finally:
        proc.terminate()
        with trio.fail_after(20):
            await proc.wait()
