"""Served sessions on a Ray cluster: the :class:`~._serve.NodeLauncher` of ``pi-actors serve
--placement ray``.

Each session's runtime (coordinator, provider, tool pool) runs in a Ray *actor* of its own,
created with the declared resources (``num_cpus``, custom ``resources`` such as
``{"pi_worker": 1}``, Ray's ``SPREAD`` strategy, no Ray restarts): Ray only chooses the node
and starts the process. In it, :func:`~._serve.host_node_session` runs under ``trio.run`` on
a thread of its own (a Ray worker's main thread is Ray's; the actors' parent-death signal
needs a forking thread that lives exactly as long as the session) and dials the server's
connect links for the UI and the session store, which stay on the server: our links carry
the traffic, not Ray's calls.

The actor process is the session's alone (an actor is never reused), so the environment the
server ships with the job (``_ray.shipped_environment``: provider keys, the variables
``models.json`` names, ``PI_ACTORS_*``) is set in it before the runtime starts. The model
configuration is shipped by value as well: the server's agent directory's files
(``_ray.agent_files``: ``models.json``, ``settings.json``, ``auth.json``…) are written to a
private agent directory on the node (``PI_ACTORS_DIR`` of the session's processes, hidden
from its sandboxed tools, removed when the session ends), so a node without the server's
home runs the session. Its working directory must exist on the node at the same path (a
shared file system), or be mapped with a workspace root (``_paths``).

A node lost (its raylet killed, the machine gone) takes the actor and the session's processes
with it; the server sees the coordinator's link close and reopens the session from its file
at once (``NodeSessions.reopens_lost``) — Ray places the new actor on a node that is still
alive — while its clients stay attached. Creating an actor on a node that dies meanwhile is
retried (``_LAUNCH_ATTEMPTS``).

Ray is imported only when a :class:`RayNodes` is made (``make_session_host("ray")``).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import trio

from ._api import PlacementError
from ._ray import _import_ray, _ray_error, agent_files, shipped_environment

__all__ = ["RayNodes", "RayToolHost"]

#: How long a new session actor may take to be scheduled and start.
_START_TIMEOUT = 60.0
#: Tries at creating a session's actor (a node may die between scheduling and start).
_LAUNCH_ATTEMPTS = 3


def _where() -> str:
    """The node this Ray worker runs on: ``<ip>/<node id prefix>``."""
    import ray

    return f"{ray.util.get_node_ip_address()}/{ray.get_runtime_context().get_node_id()[:12]}"


class _SessionNode:
    """The Ray actor that holds one session's runtime (module docstring)."""

    def node(self) -> str:
        """Where this actor runs: ``<ip>/<node id prefix>``."""
        return _where()

    def run(self, job_data: bytes, files: dict[str, bytes]) -> str:
        """Run the session of ``job_data`` (JSON: ``config``, ``links``, ``env``) until its
        coordinator ends, with the agent files ``files`` (``_ray.agent_files`` of the server's
        agent dir) in a private agent directory of its own; how it ended."""
        import shutil
        import tempfile

        from ._serve import host_node_session

        job = json.loads(job_data)
        private = tempfile.mkdtemp(prefix="pi-actors-serve-")
        try:
            agent = _write_agent_dir(private, files)
            # This process is the session's alone: its environment is the session's.
            os.environ.update({**job.pop("env", {}), "PI_ACTORS_DIR": agent})
            job["config"] = _with_agent_dir(job["config"], agent)
            box: dict[str, Any] = {}

            def main() -> None:
                try:
                    box["ended"] = trio.run(host_node_session, job)
                except BaseException as exc:  # handed to the actor's thread
                    box["error"] = exc

            thread = threading.Thread(target=main, name="pi-actors session", daemon=True)
            thread.start()
            thread.join()
        finally:
            shutil.rmtree(private, ignore_errors=True)
        if "error" in box:
            raise box["error"]
        return str(box["ended"])


def _write_agent_dir(private: str, files: dict[str, bytes]) -> str:
    """``<private>/agent`` (0700) holding ``files`` by name; its path."""
    agent = os.path.join(private, "agent")
    os.makedirs(agent, mode=0o700)
    for name, data in files.items():
        with open(os.path.join(agent, os.path.basename(name)), "wb") as f:
            f.write(data)
    return agent


def _with_agent_dir(config: dict[str, Any], agent: str) -> dict[str, Any]:
    """The runtime configuration document ``config`` with the session's agent directory
    ``agent`` (the node's private copy) instead of the server's, and that copy hidden from
    its sandboxed tools (it may hold logins, as the server's own is)."""
    session = config.get("coordinator", {}).get("session")
    if isinstance(session, dict) and session.get("agentDir"):
        session["agentDir"] = agent
    sandbox = config.get("tools", {}).get("sandbox")
    if isinstance(sandbox, dict):
        sandbox["hidden"] = [*sandbox.get("hidden", []), agent]
    return config


class _ToolHostNode:
    """The Ray actor that holds one tool host: ``pi-actors tool-host`` as its child process,
    which dies with the actor (the parent-death signal, armed from a thread that lives as
    long as it)."""

    def node(self) -> str:
        """Where this actor runs: ``<ip>/<node id prefix>``."""
        return _where()

    def run(self, argv: list[str], env: dict[str, str]) -> int:
        """Run the tool host ``argv`` with ``env`` added (its token) until it exits; its status."""
        import signal
        import subprocess

        from ..runtime.child import set_parent_death_signal

        box: dict[str, int] = {}

        def main() -> None:
            child_env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
            proc = subprocess.Popen(argv, env={**child_env, **env}, stdin=subprocess.DEVNULL,
                                    preexec_fn=lambda: set_parent_death_signal(signal.SIGKILL))  # fmt: skip
            box["status"] = proc.wait()

        thread = threading.Thread(target=main, name="pi-actors tool host", daemon=True)
        thread.start()
        thread.join()
        return box.get("status", 1)


class RayToolHost:
    """A tool host running as a Ray actor (:meth:`RayNodes.start_tool_host`): ``node`` where;
    ``stop()`` ends it (the actor and its tool host)."""

    def __init__(self, ray: Any, actor: Any, node: str, ref: Any) -> None:
        self._ray = ray
        self.actor = actor
        self.node = node
        self.ref = ref

    def stop(self) -> None:
        try:
            self._ray.kill(self.actor, no_restart=True)
        except Exception:  # already gone
            pass

    async def wait_ended(self) -> None:
        """Return once the tool host has ended: exited, killed, or lost with its node."""
        await _wait_for_ref(self._ray, self.ref)


async def _wait_for_ref(ray: Any, ref: Any) -> None:
    """Wait in a thread until ``ref`` is ready (its task returned or its actor died). The
    thread has a limiter of its own: one waiter per placed session or tool host must not
    use up the shared default limiter that every other ``to_thread`` call queues on."""
    await trio.to_thread.run_sync(lambda: ray.wait([ref], timeout=None), abandon_on_cancel=True, limiter=trio.CapacityLimiter(1))


class _RayNode:
    """A session actor started by :class:`RayNodes` (a ``NodeHandle``)."""

    def __init__(self, ray: Any, actor: Any, node: str) -> None:
        self._ray = ray
        self.actor = actor
        self.node = node
        self.done = trio.Event()

    def stop(self) -> None:
        try:
            self._ray.kill(self.actor, no_restart=True)
        except Exception:  # already gone
            pass

    async def _wait(self, ref: Any) -> None:
        try:
            await _wait_for_ref(self._ray, ref)
        finally:
            self.done.set()


class RayNodes:
    """Starts served sessions' runtimes as Ray actors on the cluster at ``address``
    (``auto``: the one this machine belongs to), each declaring ``num_cpus`` and
    ``resources``. ``agent_dir`` and ``environ``: where the model configuration and the
    provider keys to ship are read (default: ours). Raises :class:`PlacementError` (one
    line) when Ray is missing or the cluster cannot be reached."""

    name = "ray"

    def __init__(
        self, address: str | None = None, *, num_cpus: float = 1.0, resources: dict[str, float] | None = None,
        agent_dir: str | None = None, environ: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        if num_cpus <= 0:
            raise PlacementError(f"a session needs more than 0 CPUs, not {num_cpus:g}")
        self.address = address or "auto"
        self.num_cpus = num_cpus
        self.resources = dict(resources or {})
        environ = dict(os.environ if environ is None else environ)
        agent_dir = os.path.expanduser(agent_dir or environ.get("PI_ACTORS_DIR") or "~/.pi-actors")
        #: The agent directory's files, shipped by value to each session's node.
        self.files = agent_files(agent_dir)
        self.env = shipped_environment(environ, self.files.get("models.json"))
        ray = _import_ray()
        self._ray = ray
        try:
            if not ray.is_initialized():
                ray.init(address=self.address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
        except Exception as exc:
            said = str(exc).strip().splitlines()
            raise PlacementError(
                f"cannot connect to the Ray cluster at {self.address}: {said[0] if said else type(exc).__name__}"
            ) from None
        #: The head's address as the nodes see it: where they dial the connect links.
        self.link_host = ray.util.get_node_ip_address()
        self._actor = ray.remote(_SessionNode)

    def start_tool_host(
        self, *, connect: str, token: str, name: str, workspace: str, resources: dict[str, float] | None = None,
        sandbox: str | None = None, command: list[str] | None = None,
    ) -> RayToolHost:  # fmt: skip
        """Start ``pi-actors tool-host`` (``command``: its argv prefix, default this
        installation's) as a Ray actor on a node that has ``resources`` (default
        ``{"tool_host": 1}``: tool hosts are chosen by a custom resource), connecting to the
        server at ``connect`` with the tool-host ``token`` as ``name``; its tools work in
        ``workspace`` on that node. Blocks until the actor runs (call it from a thread in an
        event loop); raises OSError if no node could start it."""
        from ._local import default_command

        ray = self._ray
        actor = ray.remote(_ToolHostNode).options(num_cpus=0, max_restarts=0, resources=resources or {"tool_host": 1}).remote()
        try:
            node = ray.get(actor.node.remote(), timeout=_START_TIMEOUT)
        except Exception as exc:
            ray.kill(actor, no_restart=True)
            raise OSError(f"no Ray node could start tool host {name!r}: {_ray_error(exc)}") from None
        argv = [*(command or default_command()), "tool-host", "--connect", connect, "--name", name, "--workspace", workspace]
        if sandbox:
            argv += ["--sandbox", sandbox]
        ref = actor.run.remote(argv, {"PI_ACTORS_TOKEN": token})
        return RayToolHost(ray, actor, str(node), ref)

    def check_resources(self, resources: dict[str, float], what: str) -> None:
        """Raise :class:`PlacementError` (one line naming ``what``) when no live node of the
        cluster has every amount of ``resources``: an actor asking for them would wait for
        ever."""
        for node in self._ray.nodes():
            have = node.get("Resources", {}) if node.get("Alive") else {}
            if all(have.get(name, 0.0) >= amount for name, amount in resources.items()):
                return
        wanted = ", ".join(f"{name} {amount:g}" for name, amount in resources.items())
        raise PlacementError(f"no node of the Ray cluster at {self.address} has the resources of {what} ({wanted})")

    def shutdown(self) -> None:
        """Disconnect from the cluster (idempotent)."""
        if self._ray.is_initialized():
            self._ray.shutdown()

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": 0, "scheduling_strategy": "SPREAD"}
        if self.resources:
            options["resources"] = self.resources
        return options

    async def launch(self, nursery: trio.Nursery, job: dict[str, Any]) -> _RayNode:
        """Create the session's actor, learn its node, start the runtime in it; raises OSError
        if no node could start it."""
        ray = self._ray
        last: BaseException | None = None
        for _attempt in range(_LAUNCH_ATTEMPTS):
            actor = self._actor.options(**self._options()).remote()
            asked = actor.node.remote()
            try:
                node = await trio.to_thread.run_sync(lambda: ray.get(asked, timeout=_START_TIMEOUT))  # noqa: B023
                break
            except Exception as exc:  # scheduled on a node that died, or no room in time
                last = exc
                ray.kill(actor, no_restart=True)
        else:
            raise OSError(f"no Ray node could start the session: {_ray_error(last) if last else 'unknown'}")
        handle = _RayNode(ray, actor, str(node))
        ref = actor.run.remote(json.dumps({**job, "env": self.env}).encode(), self.files)
        nursery.start_soon(handle._wait, ref)
        return handle
