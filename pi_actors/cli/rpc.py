"""``--mode rpc``: pi's JSON-lines RPC protocol on stdin/stdout (pi's packages/coding-agent, docs/architecture.md §7).

Every input line is one command ``{"id"?, "type": <command>, ...}``; each gets one response
``{"id"?, "type": "response", "command", "success", "data"? | "error"}``, and every session
event (pi's AgentEvents plus ``auto_retry_*`` / ``auto_compaction_*``) is written as its own
line, without an id, as it happens. Commands are handled concurrently, as in pi, so a long
``compact`` or ``bash`` answers after later commands.

Where we differ from pi, on purpose (docs/architecture.md §7): every error response to a
known command carries the request's ``id`` and its own ``command`` (pi answers some failures
as ``command: "parse"`` without the id); only a line that is not JSON at all is answered as
``parse``. A ``prompt`` whose run
later fails gets a second response with ``success: false``, as in pi.

pi's replies where they are not plain: a line whose ``type`` is missing or unknown is
answered without its ``id`` (``Unknown command: undefined``, no ``command``, for a missing
one), as pi; ``cycle_model`` and
``cycle_thinking_level`` answer ``data: null`` when there is nothing to cycle;
``set_thinking_level`` without a level succeeds and changes nothing; ``abort`` is answered
once the run's ``agent_end`` has been written; ``bash`` runs while the agent streams (its
message is recorded when the run ends) and ``abort_bash`` stops it.

Framing: records are split on ``\\n`` only (U+2028/U+2029 inside strings do not split), a
trailing ``\\r`` is dropped, a last unterminated line is handled at end of input.

End of input, on purpose unlike pi (which exits at once, dropping a prompt in flight): the
process waits for the running commands and the agent to finish, then exits — so that
``printf '{"type":"prompt",...}' | pi-actors --mode rpc`` gets its answer. A client that
wants pi's behaviour sends ``abort`` before closing stdin (or kills the process, as pi's
RpcClient does on ``stop()``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec
import trio

from ..actors import CoordinatorLink, open_local_runtime
from ..ai import supported_thinking_levels
from ..ai.types import Model
from ..protocol.config import RuntimeConfig
from ..protocol.events import AgentEventRebuilder
from ..runtime import ConnectionLost, Peer, RemoteError
from ._sessions import print_session_warnings

__all__ = ["run_rpc", "RpcSession"]

_encoder = msgspec.json.Encoder()

#: Commands whose events (queue_update, session_info_changed, compaction_*, ...) pi writes
#: before their response.
_EMITTING = frozenset({"steer", "follow_up", "set_session_name", "compact", "bash"})

#: ``respond(data=NULL)``: a ``data: null`` member (pi's "nothing to cycle"), not no data.
NULL: Any = object()


class RpcSession:
    """One RPC client's commands, translated to calls of the coordinator's methods
    (:data:`pi_actors.protocol.coordinator.COORDINATOR`). Arguments are passed on as given,
    so a mistyped one is refused by the coordinator's router with an error naming the field
    (``fork: Expected `str`, got `int` - at `$.entryId```), answered to that request only."""

    def __init__(self, coordinator: Peer | CoordinatorLink, out: Any, config: RuntimeConfig) -> None:
        self.c = coordinator
        self.out = out
        self._held: list[bytes] = []  # lines written but not flushed yet
        self.config = config
        self._runs = 0
        self._idle = trio.Event()
        self._idle.set()
        #: Set while no run is open in the events written (agent_start seen, agent_end not yet).
        self._no_run_written = trio.Event()
        self._no_run_written.set()
        #: The sequence number of the last event written, and an event set when it grows.
        self._seq_written = 0
        self._seq_grew = trio.Event()

    def write(self, obj: Any, *, flush: bool = True) -> None:
        """One JSON line; ``flush=False`` holds it for the next flush (the events of one
        burst go out in one write)."""
        self._held.append(_encoder.encode(obj) + b"\n")
        if flush:
            self.flush()

    def flush(self) -> None:
        """Write the lines held, in one write (the output's own buffering is not relied
        on: with ``PYTHONUNBUFFERED`` set, each ``write`` of ``sys.stdout.buffer`` is a
        system call)."""
        if not self._held:
            return
        data = memoryview(b"".join(self._held))
        self._held.clear()
        while data:
            written = self.out.write(data)  # a raw file may take part (blocking: never none)
            if written is None or written >= len(data):
                break
            data = data[written:]
        self.out.flush()

    def respond(self, request: dict, command: str, *, data: Any = None, error: str | None = None) -> None:
        """One response line, with the request's ``id`` when it has one; ``data=NULL``
        writes ``data: null``."""
        response: dict[str, Any] = {"type": "response", "command": command, "success": error is None}
        if "id" in request:
            response = {"id": request["id"], **response}
        if error is not None:
            response["error"] = error
        elif data is NULL:
            response["data"] = None
        elif data is not None:
            response["data"] = data
        self.write(response)

    def refuse_unknown(self, request: Any) -> None:
        """pi's reply to a line that is JSON but no command it knows:
        ``error(undefined, command.type, `Unknown command: ${command.type}`)`` — no ``id``
        (even when the line has one), ``command`` as given (left out when there is none, as
        JSON.stringify drops ``undefined``), and the type as JavaScript prints it."""
        has_type = isinstance(request, dict) and "type" in request
        kind = request["type"] if has_type else None
        response: dict[str, Any] = {"type": "response", "command": kind, "success": False,
                                    "error": f"Unknown command: {_js_text(kind) if has_type else 'undefined'}"}  # fmt: skip
        if not has_type:
            del response["command"]
        self.write(response)

    # -- events --------------------------------------------------------------------------

    async def pump_events(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Write every session event, in order, for as long as the session lives; after a
        coordinator restart, subscribe again to the new one (its snapshot is not written)."""
        started = False
        while True:
            rebuild = AgentEventRebuilder()
            try:
                async with self.c.open_call("subscribe", {"maxQueue": 1_000_000}) as call:
                    try:
                        async for chunk in call:
                            if "snapshot" in chunk:
                                rebuild.seed(chunk["snapshot"].get("streamMessage"))
                                self._wrote(chunk["snapshot"].get("seq", 0))
                                if not started:
                                    started = True
                                    task_status.started()
                                continue
                            event = rebuild.apply(chunk["event"])
                            # Flushed once no more updates are in hand: every line is out
                            # before this task waits for the coordinator, or before a
                            # command's response (written by another task) can follow it.
                            self.write(event, flush=call.buffered() == 0)
                            self._note_run(event.get("type"))
                            self._wrote(chunk.get("seq", 0))
                    finally:
                        self.flush()
                    await call.result()
            except ConnectionLost:
                if not started or self.c.closed_event.is_set():
                    raise
                self._note_run("agent_end")  # that coordinator's run is over
            except RemoteError as exc:
                if not started or exc.code == "session_failed":
                    raise

    def _wrote(self, seq: int) -> None:
        self._seq_written = seq
        self._seq_grew.set()
        self._seq_grew = trio.Event()

    async def _catch_up(self) -> None:
        """Wait until every event the coordinator has sent so far is written: the events a
        command caused come before its response, as pi writes them."""
        target = (await self._state()).get("seq", 0)
        while self._seq_written < target:
            await self._seq_grew.wait()

    def _note_run(self, kind: str | None) -> None:
        if kind == "agent_start" and self._no_run_written.is_set():
            self._no_run_written = trio.Event()
        elif kind == "agent_end":
            self._no_run_written.set()

    # -- commands ------------------------------------------------------------------------

    async def handle_line(self, line: str, nursery: trio.Nursery) -> None:
        try:
            request = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            self.write({"type": "response", "command": "parse", "success": False, "error": f"Failed to parse command: {exc}"})
            return
        handler = None
        if isinstance(request, dict) and isinstance(request.get("type"), str):
            if request["type"] == "extension_ui_response":
                await self.answer_extension_ui(request)
                return
            handler = getattr(self, f"cmd_{request['type']}", None)
        if handler is None:
            self.refuse_unknown(request)
            return
        command = request["type"]
        try:
            data = await handler(request, nursery)
            if command in _EMITTING:
                await self._catch_up()
        except RemoteError as exc:
            self.respond(request, command, error=exc.message)
        except (KeyError, TypeError, ValueError) as exc:
            self.respond(request, command, error=f"Invalid {command} command: {exc}")
        else:
            self.respond(request, command, data=data)

    async def _state(self) -> dict:
        return await self.c.call("get_state")

    async def cmd_prompt(self, request: dict, nursery: trio.Nursery) -> None:
        text = request["message"]
        if not isinstance(text, str):
            raise ValueError("message must be a string")
        images = _images_of(request)
        if self.config.extensions is None and self._runs == 0 and self._no_run_written.is_set():
            # Nothing can be running: only this client starts runs (no extension can), none of
            # its prompts is open, and every run it was told of has ended. No round trip for
            # the state before the run. (A run of another origin would be refused by the
            # coordinator's prompt as before: an error response.)
            self._start_run(request, text, images, nursery)
            return None
        state = await self._state()
        if state["isStreaming"] and self._no_run_written.is_set() and self._runs:
            # The run's agent_end is written (the client may answer it at once, as pi's
            # clients do), but its call has not returned yet: the coordinator is finishing
            # the run (saving, the compaction check). Not a run to steer: wait for its end.
            await self._idle.wait()
            state = await self._state()
        if state["isStreaming"]:
            behavior = request.get("streamingBehavior")
            if behavior == "steer":
                await self.c.call("steer", {"text": text, **images})
                await self._catch_up()  # its queue_update first
                return None
            if behavior == "followUp":
                await self.c.call("follow_up", {"text": text, **images})
                await self._catch_up()
                return None
            raise RemoteError(
                "busy", "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
            )
        self._start_run(request, text, images, nursery)
        return None

    def _start_run(self, request: dict, text: str, images: dict[str, Any], nursery: trio.Nursery) -> None:
        self._runs += 1
        self._idle = trio.Event()
        nursery.start_soon(self._run_prompt, request, text, images)

    async def _run_prompt(self, request: dict, text: str, images: dict[str, Any]) -> None:
        try:
            await self.c.call("prompt", {"text": text, "events": False, **images})
        except RemoteError as exc:
            self.respond(request, "prompt", error=exc.message)
        finally:
            self._runs -= 1
            if self._runs == 0:
                self._idle.set()

    async def cmd_steer(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("steer", {"text": request["message"], **_images_of(request)})

    async def cmd_follow_up(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("follow_up", {"text": request["message"], **_images_of(request)})

    async def cmd_abort(self, request: dict, nursery: trio.Nursery) -> None:
        """Answered once the run has ended and its ``agent_end`` is written, as pi does."""
        await self.c.call("abort")
        await self._no_run_written.wait()

    async def cmd_abort_retry(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("abort_retry")

    async def cmd_new_session(self, request: dict, nursery: trio.Nursery) -> dict:
        result = await self.c.call("new_session", {"parentSession": request.get("parentSession")})
        return {"cancelled": result.get("cancelled", False)}

    async def cmd_get_state(self, request: dict, nursery: trio.Nursery) -> dict:
        state = await self._state()
        out = {
            "model": _pi_model(state.get("model")),
            "thinkingLevel": state.get("thinkingLevel"),
            "isStreaming": state.get("isStreaming"),
            "isCompacting": state.get("isCompacting", False),
            "steeringMode": state.get("steeringMode"),
            "followUpMode": state.get("followUpMode"),
            "sessionFile": state.get("sessionFile"),
            "sessionId": state.get("sessionId"),
            "sessionName": state.get("sessionName"),
            "autoCompactionEnabled": state.get("autoCompactionEnabled", True),
            "messageCount": state.get("messageCount"),
            "pendingMessageCount": state.get("pendingMessageCount", 0),
        }
        return {k: v for k, v in out.items() if v is not None}

    async def cmd_set_model(self, request: dict, nursery: trio.Nursery) -> dict:
        return _pi_model(await self.c.call("set_model", {"provider": request["provider"], "modelId": request["modelId"]}))

    async def cmd_get_available_models(self, request: dict, nursery: trio.Nursery) -> dict:
        models = (await self.c.call("get_available_models"))["models"]
        return {"models": [_pi_model(m) for m in models]}

    async def cmd_cycle_model(self, request: dict, nursery: trio.Nursery) -> Any:
        """pi's ``cycleModel`` forward: among the scoped models with credentials (``--models``
        / ``enabledModels``; a scoped ``:level`` is applied, else the level is kept, clamped),
        else among all models with credentials; ``data: null`` with one candidate or none."""
        from .model_scope import cycle_target

        models = (await self.c.call("get_available_models"))["models"]
        state = await self._state()
        target = cycle_target(self.config.coordinator.scoped_models, models, state.get("model") or {})
        if target is None:
            return NULL
        nxt, level, scoped = target
        model = await self.c.call("set_model", {"provider": nxt["provider"], "modelId": nxt["id"]})
        if level:  # a scoped :level; else set_model kept the session's level (clamped)
            await self.c.call("set_thinking_level", {"level": level})
        return {"model": _pi_model(model), "thinkingLevel": (await self._state())["thinkingLevel"], "isScoped": scoped}

    async def cmd_set_thinking_level(self, request: dict, nursery: trio.Nursery) -> None:
        if request.get("level") is None:
            return None  # pi accepts it and the level stays as it is
        await self.c.call("set_thinking_level", {"level": request["level"]})

    async def cmd_cycle_thinking_level(self, request: dict, nursery: trio.Nursery) -> Any:
        """The next level the model supports (``xhigh`` only where it has it); ``data: null``
        for a model without reasoning, as pi."""
        state = await self._state()
        plain = state.get("model")
        if not (plain or {}).get("reasoning"):
            return NULL
        levels = supported_thinking_levels(msgspec.convert(plain, Model))
        level = state.get("thinkingLevel") or "off"
        nxt = levels[(levels.index(level) + 1) % len(levels)] if level in levels else "off"
        return await self.c.call("set_thinking_level", {"level": nxt})

    async def cmd_set_steering_mode(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("set_queue_mode", {"queue": "steering", "mode": request["mode"]})

    async def cmd_set_follow_up_mode(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("set_queue_mode", {"queue": "followUp", "mode": request["mode"]})

    async def cmd_compact(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("compact", {"customInstructions": request.get("customInstructions")})

    async def cmd_set_auto_compaction(self, request: dict, nursery: trio.Nursery) -> None:
        # Passed as given: a non-boolean is refused naming the field, not read as truthy.
        await self.c.call("set_auto", {"what": "compaction", "enabled": request["enabled"]})

    async def cmd_set_auto_retry(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("set_auto", {"what": "retry", "enabled": request["enabled"]})

    async def cmd_bash(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("bash", {"command": request["command"]})

    async def cmd_abort_bash(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("abort_bash")

    async def cmd_get_session_stats(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("get_session_stats")

    async def cmd_export_html(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("export_html", {"outputPath": request.get("outputPath")})

    async def cmd_switch_session(self, request: dict, nursery: trio.Nursery) -> dict:
        result = await self.c.call("switch_session", {"sessionPath": request["sessionPath"]}) or {}
        return {"cancelled": False, **({"warnings": result["warnings"]} if result.get("warnings") else {})}

    async def cmd_fork(self, request: dict, nursery: trio.Nursery) -> dict:
        result = await self.c.call("fork", {"entryId": request["entryId"]})
        return {"text": result["text"], "cancelled": False}

    async def cmd_clone(self, request: dict, nursery: trio.Nursery) -> dict:
        await self.c.call("clone")
        return {"cancelled": False}

    async def cmd_get_fork_messages(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("fork_messages")

    async def cmd_get_last_assistant_text(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("get_last_assistant_text")

    async def cmd_set_session_name(self, request: dict, nursery: trio.Nursery) -> None:
        await self.c.call("set_session_name", {"name": request["name"]})

    async def cmd_get_messages(self, request: dict, nursery: trio.Nursery) -> dict:
        return await self.c.call("get_messages")

    async def cmd_get_commands(self, request: dict, nursery: trio.Nursery) -> dict:
        """pi's list of what a prompt may start with: extension commands, then prompt
        templates, then skills (``skill:name``), each with its ``sourceInfo``."""
        resources = self.config.coordinator.resources
        # Extension commands first (pi's order), with pi's synthetic source info for a path.
        registered = (await self.c.call("extension_commands"))["commands"] if self.config.extensions is not None else []
        commands: list[dict[str, Any]] = [
            {
                "name": c["name"], "description": c.get("description", ""), "source": "extension",
                "sourceInfo": {"path": c.get("extension", ""), "source": "local", "scope": "temporary", "origin": "top-level",
                               "baseDir": os.path.dirname(c.get("extension", ""))},
            }
            for c in registered
        ]  # fmt: skip
        commands += [_command(t.name, t.description, "prompt", t, os.path.dirname(t.path)) for t in resources.templates]
        commands += [_command(f"skill:{s.name}", s.description, "skill", s, s.base_dir) for s in resources.skills]
        return {"commands": commands}

    async def answer_extension_ui(self, request: dict) -> None:
        """pi's ``extension_ui_response`` (an answer to an ``extension_ui_request`` event):
        no response line, as in pi — except an error response when it answers nothing."""
        answer = {k: request[k] for k in ("id", "value", "confirmed", "cancelled") if k in request}
        try:
            await self.c.call("extension_ui_response", answer)
        except RemoteError as exc:
            self.respond(request, "extension_ui_response", error=exc.message)

    async def wait_idle(self) -> None:
        await self._idle.wait()


def _command(name: str, description: str, kind: str, item: Any, base_dir: str) -> dict[str, Any]:
    """One ``get_commands`` entry in pi's shape: ``sourceInfo`` says where it was found
    (``source``: ``auto``, ``local`` or a package's source; ``scope``: ``user``, ``project`` or
    ``temporary``; ``origin``: ``package`` for a package's, else ``top-level``)."""
    packaged = item.source not in ("auto", "local")
    info = {"path": item.path, "source": item.source, "scope": item.scope, "origin": "package" if packaged else "top-level", "baseDir": base_dir}
    return {"name": name, "description": description, "source": kind, "sourceInfo": info}


def _pi_model(model: Any) -> Any:
    """A model as pi writes it: the optional members that are not set are left out."""
    if not isinstance(model, dict):
        return model
    return {k: v for k, v in model.items() if v is not None}


def _js_text(value: Any) -> str:
    """``${value}`` in JavaScript, for the JSON values a ``type`` can be."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, list):
        return ",".join("" if v is None else _js_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


async def _lines(stream: trio.abc.ReceiveStream):
    """Records split on ``\\n`` only; a trailing ``\\r`` dropped; the last one at EOF."""
    buffer = b""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            break
        buffer += data
        *complete, buffer = buffer.split(b"\n")
        for raw in complete:
            yield raw.removesuffix(b"\r").decode("utf-8", errors="replace")
    if buffer.strip():
        yield buffer.removesuffix(b"\r").decode("utf-8", errors="replace")


async def run_rpc(config: RuntimeConfig, prestarted: Any = None) -> int:
    """Serve pi's RPC protocol on this process's stdin/stdout until end of input.
    ``prestarted``: actor processes started ahead (the tool pool the CLI forked), for
    ``open_local_runtime``.

    A coordinator that dies is restarted with the session reloaded from its file: the
    commands in flight get error responses, later ones go to the new coordinator. If the
    session fails for good (too many restarts), one line on stderr and exit status 1."""
    out = sys.stdout.buffer
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    code = 0
    async with open_local_runtime(config, store_with_coordinator=True, restart_coordinator=True, spares=True,
                                  prestarted=prestarted) as coordinator:  # fmt: skip
        session = RpcSession(coordinator, out, config)
        try:
            described = await coordinator.call("session")
        except RemoteError as exc:  # the session could not be opened (e.g. it is locked)
            from ._config import ConfigError

            raise ConfigError(exc.message) from None
        print_session_warnings(described)
        async with trio.open_nursery() as nursery:

            async def watch_failure() -> None:
                nonlocal code
                await coordinator.closed_event.wait()
                if coordinator.failure is not None:
                    print(f"Error: {coordinator.failure}", file=sys.stderr, flush=True)
                    code = 1
                    nursery.cancel_scope.cancel()

            nursery.start_soon(watch_failure)
            await nursery.start(session.pump_events)
            async with trio.open_nursery() as commands:
                async for line in _lines(stdin):
                    if line.strip():
                        commands.start_soon(session.handle_line, line, commands)
            await session.wait_idle()
            nursery.cancel_scope.cancel()
    await stdin.aclose()
    return code


def _images_of(request: dict) -> dict[str, Any]:
    """The request's ``images`` (pi's ``[{type: "image", data, mimeType}]``; absent or null:
    none) as the coordinator call's keyword, ``{}`` when there are none. Raises ValueError
    naming the first bad entry (the command's error response)."""
    images = request.get("images")
    if images is None:
        return {}
    if not isinstance(images, list):
        raise ValueError("images must be an array of {type: 'image', data, mimeType}")
    for i, image in enumerate(images):
        if not (
            isinstance(image, dict)
            and image.get("type", "image") == "image"
            and isinstance(image.get("data"), str)
            and isinstance(image.get("mimeType"), str)
        ):
            raise ValueError(f"images[{i}] must be {{type: 'image', data: base64 string, mimeType: string}}")
    return {"images": [{"type": "image", "data": i["data"], "mimeType": i["mimeType"]} for i in images]} if images else {}
