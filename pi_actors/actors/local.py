"""The local multi-process placement, supervised: the calling process (the CLI, or the server
for a hosted session) holds the UI and supervises the actors of one session.

``open_local_runtime(config)`` spawns the children — provider streamer, tool pool (which
spawns its own workers), coordinator, and session store (a separate process, or with
``store_with_coordinator`` an object in the coordinator's process that it calls directly,
``_local_store.LocalStore``) — links them with socketpairs
(the coordinator to each of the others, the UI to the coordinator) and yields a
:class:`CoordinatorLink`: the UI's connection to the coordinator, with ``call`` /
``open_call`` / ``closed_event`` like a ``Peer``.

Supervision (docs/architecture.md §5; OTP's one_for_one for provider and pool, rest_for_one
for the coordinator):

* every child is a watched actor (``runtime.start_watched_actor``): its exit is seen at once
  (pidfd), and one that stops answering liveness checks (SIGSTOP, a blocked event loop) is
  killed. Settings ``supervision`` (``protocol.config.SupervisionSection``) tune both.
* With extensions (``RuntimeConfig.extensions``), an extension host is started once the
  coordinator asks for it (after it has linked the provider and the pool) with the user's
  environment (extensions are trusted code), and restarted and re-linked like them.
* A dead provider or tool pool is restarted and re-linked to the running coordinator: this
  process creates the new socketpair (API keys never leave it and the provider) and passes
  the coordinator's end over a control channel (``FdChannel``, SCM_RIGHTS), after telling it
  how the old one died. The call in flight fails ("... was killed by SIGKILL; the outcome of
  the request is unknown"); the next one reaches the new actor.
* A dead coordinator (or store) takes the provider and pool with it; with
  ``restart_coordinator`` the whole set is started again, the coordinator reopening the
  session file it last reported. The UI's calls in flight fail with :class:`ActorDied`; its
  next call waits for the new coordinator. Without ``restart_coordinator`` (print mode, the
  server) the link closes for good (``closed_event``), as a plain Peer would.
* At most ``max_restarts`` restarts (all kinds together) in ``window`` seconds, with
  back-off; beyond that the session fails: every call fails ``session_failed`` with one
  clear message (``CoordinatorLink.failure``) and ``closed_event`` is set.

Leaving the block closes the UI link; every child then sees end-of-stream and exits; any
child still running after ``shutdown_grace`` is terminated, then killed. Each child also
dies with this process (parent-death signal), so a SIGKILLed CLI leaves nothing behind.
Tool processes and the coordinator get an environment without credentials.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio

from ..coding.sandbox.env import is_credential_name
from ..protocol.config import RuntimeConfig, read_part, set_fields
from ..protocol.extension_host import ExtensionHostConfig
from ..runtime import (
    ConnectionLost,
    FdChannel,
    PrestartedActor,
    RestartIntensity,
    RestartPolicy,
    TooManyRestarts,
    WatchedActor,
    child_environment,
    link_pair,
    open_peer,
    start_watched_actor,
)
from ._coordinator_link import CoordinatorLink

__all__ = ["CoordinatorLink", "open_local_runtime", "run_coordinator_with_store", "secret_env_names"]


def secret_env_names(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Names of the variables of ``env`` (default: this process's environment) that may hold
    credentials: they are never given to the coordinator, the store or a tool process."""
    names = os.environ if env is None else env
    return tuple(name for name in names if is_credential_name(name))


def _wire(part: msgspec.Struct) -> dict[str, Any]:
    """A configuration part as it crosses to an actor process (camelCase, defaults left out)."""
    doc: dict[str, Any] = msgspec.to_builtins(part)
    return doc


class _Supervisor:
    """Starts the actor set, watches it, restarts what dies (module docstring).

    Every actor process is a task of the supervisor's own nursery (``self.nursery``), not of
    one generation's, so that a warm spare can outlive the generation that started it."""

    def __init__(
        self,
        config: RuntimeConfig,
        link: CoordinatorLink,
        *,
        policy: RestartPolicy,
        tools_link: Any,
        processes: dict[str, Any] | None,
        handshake_timeout: float | None,
        store_with_coordinator: bool,
        spares: bool,
        prestarted: Mapping[str, PrestartedActor] | None = None,
        connect: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        self.config = config
        #: Connect links (``runtime._connect``) the coordinator dials instead of ours:
        #: ``ui`` (the session's UI is elsewhere), ``store`` (its store is elsewhere).
        self.connect = dict(connect or {})
        self.link = link
        self.policy = policy
        self.intensity = RestartIntensity(policy)
        self.tools_link = tools_link
        self.processes = processes
        self.handshake_timeout = handshake_timeout
        self.store_with_coordinator = store_with_coordinator
        self.closing = False
        self.session_path: str | None = None
        self.scrubbed = child_environment(scrub=secret_env_names())
        self.nursery: trio.Nursery | None = None
        self._generation_scope: trio.CancelScope | None = None
        #: Warm standbys by actor name: started, warmed up, waiting for their coordinator.
        self.spares: dict[str, tuple[WatchedActor, socket.socket]] = {}
        self._spares_wanted = spares
        self._spares_changed = trio.Event()
        self._spares_scope: trio.CancelScope | None = None
        #: Processes started ahead by our owner (``prestart_actor``), booted by the first
        #: start of their name; what is left unused is given up when the supervisor ends.
        self.prestarted = dict(prestarted or {})
        #: Whether the session has extensions: then an extension host is started with it.
        self.has_extensions = bool(config.extensions is not None and config.extensions.specs)
        #: Set when the coordinator asks for its extension host (``{"start": "extensions"}``).
        self._host_wanted = trio.Event()

    # -- the whole set ----------------------------------------------------------------------

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run generations of the actor set until closing, a failure, or (without coordinator
        restarts) the coordinator's end. The first generation's start-up errors propagate."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            try:
                await self._run_generations(task_status)
            finally:
                for early in self.prestarted.values():
                    early.abandon()
                self._drop_spares()
                nursery.cancel_scope.deadline = trio.current_time() + 5.0

    async def _run_generations(self, task_status: Any) -> None:
        first = True
        while True:
            if first:
                reason = await self._generation(task_status)
            else:
                try:
                    reason = await self._generation(None)
                except (ConnectionLost, OSError) as exc:
                    # The restarted coordinator did not come up (its handshake failed).
                    reason = f"did not start ({exc})"
            first = False
            if self.closing or self.link.closed_event.is_set():
                return
            if not self.link.restartable:
                self.link._end(f"the coordinator process {reason}", failed=False)
                return
            try:
                delay = self.intensity.next_delay("the coordinator")
            except TooManyRestarts as exc:
                self._fail(str(exc), last=f"the coordinator process {reason}")
                return
            self.link._note(f"the coordinator process {reason}; restarting it with the session from its file")
            await trio.sleep(delay)

    def _fail(self, message: str, *, last: str) -> None:
        text = f"session failed: {last}, and {message}"
        self.link._note(text)
        self.link._end(text, failed=True)
        if self._generation_scope is not None:
            self._generation_scope.cancel()

    def _coordinator_config(self) -> dict[str, Any]:
        """The coordinator's part as sent: after a restart it resumes the session file it
        last reported; ``relink`` names the links this supervisor re-links."""
        part = self.config.coordinator
        session = part.session
        if self.session_path is not None:
            session = msgspec.structs.replace(session, resume=self.session_path, fork_from=None, no_session=False)
        relink = ["provider"] + (["tools"] if self.tools_link is None else []) + (["extensions"] if self.has_extensions else [])
        # Its own pool keeps ``warm`` workers in the session's cwd: a reply needs to announce
        # only the calls beyond those (see ``_tool_warm``).
        warm = self.config.tools.warm if self.tools_link is None and self._pool_in_cwd() else 0
        return _wire(msgspec.structs.replace(part, session=session, relink=relink, extensions=self.config.extensions, warm_tools=warm))

    def _pool_in_cwd(self) -> bool:
        """Whether the pool's warm workers run the coordinator's calls: unsandboxed (one kind of
        worker for every cwd) or sandboxed with the session's cwd as the workspace."""
        sandbox = self.config.tools.sandbox
        if sandbox is None:
            return False  # the platform's default policy, without a workspace: no warm workers
        if sandbox.mode == "off":
            return True
        cwd = self.config.coordinator.cwd
        return bool(cwd and sandbox.workspace) and os.path.realpath(cwd) == os.path.realpath(sandbox.workspace)

    async def _generation(self, task_status: Any) -> str:
        """One start of the whole set; returns how its coordinator (or store) ended. The
        actors it started are all gone (reaped) when it returns."""
        own_tools = self.tools_link is None
        if self.link.generation > 0 and not own_tools:
            # The remote tool host's link was given to the first coordinator and is gone.
            self.link._end("the coordinator process died, and its tool host link cannot be restored", failed=True)
            return "died"
        reason = "was stopped by its supervisor"
        watched: dict[str, WatchedActor] = {}
        try:
            async with trio.open_nursery() as nursery:
                self._generation_scope = nursery.cancel_scope
                control_ours, control_theirs = link_pair()
                coordinator_links: dict[str, Any] = {"control": control_theirs}
                owned = [control_ours, control_theirs]
                ui_end = None
                if "ui" in self.connect:
                    coordinator_links["ui"] = self.connect["ui"]
                else:
                    ui_end, coordinator_links["ui"] = link_pair()
                    owned += [ui_end, coordinator_links["ui"]]
                try:
                    watched["provider"], coordinator_links["provider"] = await self._take("provider")
                    owned.append(coordinator_links["provider"])
                    if own_tools:
                        watched["tool-pool"], coordinator_links["tools"] = await self._take("tool-pool")
                        owned.append(coordinator_links["tools"])
                    else:
                        coordinator_links["tools"] = self.tools_link
                    host_end = None
                    if self.has_extensions:
                        self._host_wanted = trio.Event()
                        coordinator_links["extensions"], host_end = link_pair()
                        owned += [coordinator_links["extensions"], host_end]
                    entry, config = await self._store(coordinator_links, owned, watched)
                    watched["coordinator"] = await self._spawn("coordinator", entry, coordinator_links, config, self.scrubbed)
                except BaseException:
                    for sock in owned:
                        sock.close()
                    raise
                control = FdChannel(trio.socket.from_stdlib_socket(control_ours))
                nursery.start_soon(self._read_control, control)
                ended = trio.Event()
                await self._start_ui(nursery, ui_end, ended, task_status)
                if host_end is not None:
                    nursery.start_soon(self._start_extension_host, host_end, watched, control, ended)
                for name in ("provider", "tool-pool"):
                    if name in watched:
                        nursery.start_soon(self._keep, name, watched, control, ended)
                principal = [watched[n] for n in ("coordinator", "session-store") if n in watched]
                reason = await _first_down(principal)
                self.link._report_down(reason)
                ended.set()
                nursery.cancel_scope.deadline = trio.current_time() + 5.0
        finally:
            self._generation_scope = None
            # rest_for_one: the provider and the pool were linked to the dead coordinator.
            # (On a normal close they see end-of-stream and exit by themselves, and the
            # supervisor's nursery waits for them.)
            if not self.closing:
                for actor in watched.values():
                    if not actor.down.is_set():
                        actor.kill()
                with trio.move_on_after(10):
                    for actor in watched.values():
                        await actor.down.wait()
        return reason

    async def _store(self, coordinator_links: dict[str, Any], owned: list[socket.socket],
                     watched: dict[str, WatchedActor]) -> tuple[str, Any]:  # fmt: skip
        """Give the coordinator its session store — a connect link to one elsewhere, a task of
        its own process (``store_with_coordinator``), or a store process started here — and
        return the coordinator's entry and configuration to match."""
        if "store" in self.connect:
            coordinator_links["store"] = self.connect["store"]
        elif self.store_with_coordinator:
            config = {"coordinator": self._coordinator_config(), "store": _wire(self.config.store)}
            return "pi_actors.actors.local:run_coordinator_with_store", config
        else:
            coord_store, store = link_pair()
            owned += [coord_store, store]
            watched["session-store"] = await self._spawn(
                "session-store", "pi_actors.actors.session_store:run_session_store",
                {"coordinator": store}, _wire(self.config.store), self.scrubbed,
            )  # fmt: skip
            coordinator_links["store"] = coord_store
        return "pi_actors.actors.coordinator:run_coordinator", self._coordinator_config()

    async def _start_ui(self, nursery: trio.Nursery, ui_end: socket.socket | None, ended: trio.Event, first_status: Any) -> None:
        """Hold the UI's end of the coordinator's link (``_hold_ui``) — unless the UI is
        elsewhere (a ``ui`` connect link): then only report the start."""
        if ui_end is None:
            if first_status is not None:
                first_status.started()
            return
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ui_end))
        # The coordinator is our own child: give it the start-up time of a supervised
        # actor (the protocol's 5 s guards servers against strangers, not a parent).
        extra = {"handshake_timeout": self.handshake_timeout or self.policy.start_timeout}
        await nursery.start(self._hold_ui, stream, extra, ended, first_status)

    async def _hold_ui(self, stream: trio.SocketStream, extra: dict[str, Any], ended: trio.Event, first_status: Any,
                       task_status: Any = trio.TASK_STATUS_IGNORED) -> None:  # fmt: skip
        async with open_peer(stream, side="client", role="ui", name="coordinator", **extra) as peer:
            self.link._attach(peer)
            if self.link.generation > 1:
                self.link._note("coordinator restarted", tell=False)
            task_status.started()
            if first_status is not None:
                first_status.started()
                if self._spares_wanted:
                    assert self.nursery is not None
                    self.nursery.start_soon(self._keep_spares_until_closed)
            await ended.wait()

    async def _read_control(self, control: FdChannel) -> None:
        try:
            while True:
                message, sock = await control.receive()
                if sock is not None:
                    sock.close()
                if "start" in message:
                    self._host_wanted.set()
                if "session" in message:
                    path = message["session"]
                    self.session_path = path if isinstance(path, str) and path else None
        except (EOFError, ValueError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            control.close()

    # -- one actor ----------------------------------------------------------------------------

    async def _spawn(self, name: str, entry: str, links: dict[str, Any], config: Any, env: Any, *, record: bool = True,
                     prestarted: PrestartedActor | None = None) -> WatchedActor:  # fmt: skip
        assert self.nursery is not None
        actor = await start_watched_actor(
            self.nursery, name=name, entry=entry, links=links, config=config, env=env, policy=self.policy, prestarted=prestarted
        )
        if record and self.processes is not None:
            self.processes[name] = actor.process
        return actor

    async def _start(self, name: str, *, standby: bool = False) -> tuple[WatchedActor, socket.socket]:
        """Start a provider or tool pool; returns it and the coordinator's end of its link.
        A process our owner started ahead for ``name`` is booted instead, the first time."""
        early = None if standby else self.prestarted.pop(name, None)
        if early is not None:
            ours, links = early.take_end("coordinator"), {}
        else:
            ours, theirs = link_pair()
            links = {"coordinator": theirs}
        try:
            if name == "extension-host":
                actor = await self._spawn_extension_host(links)
            elif name == "provider":
                config = _wire(msgspec.structs.replace(self.config.provider, standby=standby))
                actor = await self._spawn(
                    name, "pi_actors.actors.provider:run_provider", links, config, None, record=not standby, prestarted=early
                )
            else:
                config = _wire(msgspec.structs.replace(self.config.tools, standby=standby))
                actor = await self._spawn(
                    name, "pi_actors.actors.tool_pool:run_tool_pool", links, config, self.scrubbed,
                    record=not standby, prestarted=early,
                )  # fmt: skip
        except BaseException:
            ours.close()
            if early is not None:
                early.abandon()
            raise
        return actor, ours

    async def _start_extension_host(self, host_end: socket.socket, watched: dict[str, WatchedActor], control: FdChannel,
                                    over: trio.Event) -> None:  # fmt: skip
        """Start the extension host once the coordinator asks for it — after it has linked
        the provider and the tool pool, so that the host's start-up never delays a hello an
        actor is waiting for — then keep it (restarts: :meth:`_keep`)."""
        try:
            async with trio.open_nursery() as waiting:

                async def until(event: trio.Event) -> None:
                    await event.wait()
                    waiting.cancel_scope.cancel()

                waiting.start_soon(until, self._host_wanted)
                waiting.start_soon(until, over)
            if over.is_set():
                return
            watched["extension-host"] = await self._spawn_extension_host({"coordinator": host_end})
        finally:
            host_end.close()
        await self._keep("extension-host", watched, control, over)

    async def _spawn_extension_host(self, links: dict[str, Any]) -> WatchedActor:
        """The extension host, with the user's environment: extensions are trusted code that
        runs unsandboxed, as in pi (README, "Security")."""
        config = _wire(self.config.extensions or ExtensionHostConfig())
        return await self._spawn("extension-host", "pi_actors.actors.extension_host:run_extension_host", links, config, None)

    async def _take(self, name: str) -> tuple[WatchedActor, socket.socket]:
        """A warm spare of ``name`` if there is one, else a new process."""
        spare = self.spares.pop(name, None)
        self._spares_changed.set()
        if spare is not None and not spare[0].down.is_set():
            if self.processes is not None:
                self.processes[name] = spare[0].process
            return spare
        if spare is not None:
            spare[1].close()
        return await self._start(name)

    async def _keep_spares_until_closed(self) -> None:
        with trio.CancelScope() as scope:
            self._spares_scope = scope
            await self._keep_spares()

    async def _keep_spares(self) -> None:
        """Keep one warm standby of the provider and of the tool pool (``spares=True``), so
        that a restart hands over a process that has already started and warmed up. The
        first ones start once the session's first run is over, and a used one is replaced
        once the next run is over: never competing for the CPU with a start or a recovery."""
        await self.link.first_run_done.wait()
        names = ["provider"] + (["tool-pool"] if self.tools_link is None else [])
        first = True
        while not self.closing and not self.link.closed_event.is_set():
            self._spares_changed = trio.Event()
            for name in names:
                spare = self.spares.get(name)
                if spare is not None and spare[0].down.is_set():
                    spare[1].close()
                    del self.spares[name]
            missing = [name for name in names if name not in self.spares]
            if missing and not first:
                await self.link.run_ended.wait()
            first = False
            for name in missing:
                if name not in self.spares:
                    self.spares[name] = await self._start(name, standby=True)
            await self._spares_changed.wait()

    def _drop_spares(self) -> None:
        if self._spares_scope is not None:
            self._spares_scope.cancel()
        for _actor, sock in self.spares.values():
            sock.close()  # the standby sees end-of-stream before its hello and exits
        self.spares.clear()

    async def _keep(self, name: str, watched: dict[str, WatchedActor], control: FdChannel, over: trio.Event) -> None:
        """one_for_one: restart ``name`` each time it dies and hand the coordinator the new
        link; ``over`` is set when the generation ends (then nothing is restarted)."""
        link_name = {"provider": "provider", "extension-host": "extensions"}.get(name, "tools")
        label = {"provider": "provider", "extension-host": "extension host"}.get(name, "tool pool")
        while True:
            actor = watched[name]
            await actor.down.wait()
            if self.closing or over.is_set():
                return
            reason = actor.reason or "stopped"
            try:
                await control.send({"down": link_name, "reason": reason})
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return  # the coordinator is gone too; its own restart takes care of all
            try:
                delay = self.intensity.next_delay(f"the {label}")
            except TooManyRestarts as exc:
                self._fail(str(exc), last=f"the {label} process {reason}")
                return
            self.link._note(f"the {label} process {reason}; restarting it")
            await trio.sleep(delay)
            try:
                watched[name], ours = await self._take(name)
            except OSError:
                return
            try:
                await control.send({"link": link_name}, ours)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            finally:
                ours.close()
            self.link._note(f"{name} restarted", tell=False)


#: How long a session store's clean exit, seen while its coordinator is not yet down, waits
#: for the coordinator's end (see ``_first_down``).
_CAUSE_GRACE = 3.0


async def _first_down(actors: list[WatchedActor]) -> str:
    """Wait until one of ``actors`` (the coordinator and, when it is a process of its own,
    the session store) is down; returns the reason to report for the generation's end.

    The coordinator's end is the cause whenever it is down: a session store exits by itself,
    with status 0, once its coordinator's link ends, so a killed coordinator makes both exits,
    and the two are seen in either order (in the same moment on a busy machine). A store's
    clean exit seen first therefore waits up to ``_CAUSE_GRACE`` seconds for the coordinator's
    own end; a store that died otherwise, or a coordinator still up after that, is reported
    as the store's loss."""
    coordinator = next((actor for actor in actors if actor.name == "coordinator"), None)
    store = next((actor for actor in actors if actor.name != "coordinator"), None)
    any_down = trio.Event()
    async with trio.open_nursery() as nursery:

        async def watch(actor: WatchedActor) -> None:
            await actor.down.wait()
            any_down.set()

        for actor in actors:
            nursery.start_soon(watch, actor)
        await any_down.wait()
        nursery.cancel_scope.cancel()
    if coordinator is not None and not coordinator.down.is_set() and store is not None and store.process.returncode == 0:
        with trio.move_on_after(_CAUSE_GRACE):
            await coordinator.down.wait()
    if coordinator is not None and coordinator.down.is_set():
        return coordinator.reason or "stopped"
    assert store is not None
    return f"lost its session store ({store.reason})"


@asynccontextmanager
async def open_local_runtime(
    config: RuntimeConfig | dict[str, Any],
    *,
    shutdown_grace: float = 3.0,
    tools_link: Any = None,
    processes: dict[str, Any] | None = None,
    handshake_timeout: float | None = None,
    store_with_coordinator: bool = False,
    restart_coordinator: bool = False,
    policy: RestartPolicy | None = None,
    announce: bool = True,
    spares: bool = False,
    prestarted: Mapping[str, PrestartedActor] | None = None,
    connect: Mapping[str, dict[str, Any]] | None = None,
) -> AsyncIterator[CoordinatorLink]:
    """Spawn and supervise the actors for ``config`` (a ``RuntimeConfig``, or its dict form)
    and yield the UI's :class:`CoordinatorLink`; see the module docstring.

    ``tools_link``: a socket to use as the coordinator's "tools" link instead of spawning a
    tool pool (the caller serves ``run_tool`` on the other end, e.g. a remote tool host).
    ``processes``: if given, kept filled with each actor's current ``ChildProcess`` by name.
    ``handshake_timeout``: how long the coordinator may take to answer the UI's hello
    (default: the policy's ``start_timeout``; it is our own child, starting on a busy host).
    ``store_with_coordinator``: place the session store in the coordinator's process (one
    process and interpreter start-up fewer; see :func:`run_coordinator_with_store`).
    ``restart_coordinator``: restart a dead coordinator (and the set) instead of ending.
    ``policy``: restart and liveness settings; default from the coordinator's settings
    (``supervision``). ``announce``: print each supervision event as one line on stderr
    (a full-screen UI turns it off; ``CoordinatorLink.notes`` has them either way).
    ``spares``: once the session is up, keep a warm standby provider and tool pool, so that
    a restart does not wait for an interpreter, the SDK import and the sandbox's start-up
    (one idle process each; for long sessions, not one-shot runs; settings can turn it off:
    ``supervision.spares``).
    ``prestarted``: actor processes the caller started ahead (``runtime.prestart_actor``, with
    the links ``coordinator`` and ``supervisor``) by name, ``provider`` or ``tool-pool``:
    booted with this configuration instead of new ones (a ``tool-pool`` one must have been
    started with the scrubbed environment, ``child_environment(scrub=secret_env_names())``).
    Owned from the call on: one that is not used is killed and reaped.
    ``connect``: connect links (``runtime._connect`` specs) the coordinator dials for its
    ``ui`` and/or ``store`` instead of socketpairs from here — a session placed on another
    node whose UI and store stay on the head (``placement._serve``). With a ``ui`` one the
    yielded link never carries calls: it only tells (``closed_event``) when the set is
    over."""
    try:
        config = read_part(config, RuntimeConfig)
        if policy is None:
            policy = RestartPolicy(**set_fields(config.coordinator.settings.supervision))
    except BaseException:
        for early in (prestarted or {}).values():
            early.abandon()  # ours from the call on (the supervisor's run gives up the rest)
        raise
    link = CoordinatorLink(restartable=restart_coordinator, announce=announce)
    supervisor = _Supervisor(
        config, link, policy=policy, tools_link=tools_link, processes=processes,
        handshake_timeout=handshake_timeout, store_with_coordinator=store_with_coordinator, spares=spares and policy.spares,
        prestarted=prestarted, connect=connect,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        try:
            yield link
        finally:
            # Children exit on end-of-stream; give them a moment, then terminate what is left.
            supervisor.closing = True
            link._end("closed", failed=False)
            await link.aclose()
            nursery.cancel_scope.deadline = trio.current_time() + shutdown_grace


async def run_coordinator_with_store(links: dict[str, trio.SocketStream], config: dict[str, Any]) -> None:
    """Actor entry for the placement ``store_with_coordinator``: the coordinator and the session
    store in one process, the store called directly (``_local_store.LocalStore``: no wire, the
    same arguments' checks, answers and refusals as a store process gives). ``config``:
    ``{"coordinator": ..., "store": ...}``. The coordinator's return closes the store (and lets
    go of its file). A store write error is still the failed call it always is."""
    from ._local_store import LocalStore
    from .coordinator import run_coordinator
    from .session_store import SessionStore

    store = LocalStore(SessionStore.from_config(config["store"]))
    try:
        await run_coordinator(links, config["coordinator"], store=store)
    finally:
        store.close()
