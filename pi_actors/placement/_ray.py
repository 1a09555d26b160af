"""Ray placement: each session is a Ray task with declared resources, run on a node of the
cluster by the local machinery there.

The driver (:class:`RayPlacement`) connects to the cluster once (``address``: ``auto`` for the
one this machine belongs to, or the head's ``host:port``; token authentication comes from
``RAY_AUTH_TOKEN``/``RAY_AUTH_MODE`` as Ray reads them) and submits one task per session with
``num_cpus``/``memory``/custom ``resources``, Ray's ``SPREAD`` strategy, and no Ray-level
retry (``max_retries=0``): a lost attempt comes back as an ``infra`` outcome and the batch
runner decides whether to run it again, so every retry is counted and written.

On the node (:func:`_session_on_node`), the task makes a private temporary directory, writes
there the agent directory's files that came with the job (``models.json``, ``settings.json``,
``auth.json``… — the model configuration, shipped by value: nothing is read from the node's
own home) and runs ``LocalPlacement(1).run(job)`` in ``trio.run`` on a thread of its own (a
Ray worker's main thread is Ray's; trio and the session's parent-death signal both need a
thread that lives exactly as long as the session). The session's environment is the
worker's minus Ray's variables and credentials, plus the job's ``env`` — the provider keys
the driver shipped and ``PI_ACTORS_DIR`` pointing at the private directory — so nothing of
one task reaches the next one in a reused worker, and keys reach only the session: its
supervisor passes them to the provider actor alone, and the tool sandbox's allow-list drops
credential names (``coding.sandbox.env``). The session file is read back and returned by
value (``session_content``); ``node`` is ``<ip>/<node id prefix>``.

Workspaces are made on the node, not the driver (``_workspace``): a job's git ``workspace``
is cloned into the task's private directory (removed with it; the repository must be
reachable from the node: a URL, or a ``file://`` path on a file system every node shares),
and a ``cwd`` under a workspace root is resolved under the job's ``node_root`` — a directory
that must exist on every node. A failed checkout or a missing directory is an ``infra``
outcome naming the node.

Failures: a worker or node lost while the task runs (``WorkerCrashedError``,
``NodeDiedError``, ``ObjectLostError``…) or an error of the task itself is an ``infra``
outcome. Cancellation of :meth:`RayPlacement.run` cancels the task with ``force=True`` (Ray
kills the worker process; the session dies with its forking thread by its parent-death
signal) and waits, shielded, until Ray reports it ended.

Ray is imported only here, and only when a :class:`RayPlacement` is made: without it the
error names ``pip install 'pi-actors[ray]'``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import msgspec
import trio

from ..coding.sandbox.env import is_credential_name
from ._api import PlacementError, SessionJob, SessionOutcome

__all__ = ["RayPlacement", "shipped_environment", "agent_files"]

#: How long a cancelled session may take to be reported gone by Ray.
_CANCEL_WAIT = 30.0
#: Agent-directory files larger than this are not shipped (they are not configuration).
_MAX_SHIPPED = 1 << 20
_INSTALL = "Ray placement needs Ray: pip install 'pi-actors[ray]'"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PlacementError(_INSTALL) from None
    return ray


def agent_files(agent_dir: str) -> dict[str, bytes]:
    """The regular top-level files of ``agent_dir`` (``models.json``, ``settings.json``,
    ``auth.json``, ``AGENTS.md``…), each up to 1 MiB, by name; {} when it does not exist."""
    files: dict[str, bytes] = {}
    try:
        entries = list(os.scandir(agent_dir))
    except FileNotFoundError:
        return files
    for entry in entries:
        if entry.is_file() and entry.stat().st_size <= _MAX_SHIPPED:
            with open(entry.path, "rb") as f:
                files[entry.name] = f.read()
    return files


def _referenced_names(models_json: bytes | None) -> set[str]:
    """Environment variable names that ``models.json`` may read a key or header from: its
    string values that look like one (``MY_KEY``)."""
    if not models_json:
        return set()
    try:
        doc = json.loads(models_json)
    except ValueError:
        return set()
    names: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value.isidentifier() and value.upper() == value and "_" in value:
            names.add(value)

    walk(doc)
    return names


def shipped_environment(environ: dict[str, str], models_json: bytes | None) -> dict[str, str]:
    """What of the driver's environment a session needs on another node: provider keys
    (credential names), the variables ``models.json`` names, and ``PI_ACTORS_*`` settings —
    never Ray's own (``RAY_*``, the cluster token) nor ``PI_ACTORS_DIR`` (made on the node)."""
    wanted = _referenced_names(models_json)
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith("RAY_")
        and name != "PI_ACTORS_DIR"
        and (is_credential_name(name) or name in wanted or name.startswith("PI_ACTORS_"))
    }


class RayPlacement:
    """Runs sessions as Ray tasks on the cluster at ``address`` (module docstring).

    ``per_session_cpus`` (> 0, default 1), ``per_session_memory`` (bytes, or None) and
    ``resources`` (custom resource -> amount) are what each session's task declares;
    ``slots`` is how many such tasks the cluster holds at once (at least 1).
    ``agent_dir``: where the model configuration is read (default: ``$PI_ACTORS_DIR`` or
    ``~/.pi-actors``); ``environ``: the driver's environment to ship keys from (default: ours).
    Raises :class:`PlacementError` (one line) when Ray is missing, the cluster cannot be
    reached, or it has no room for one session."""

    name = "ray"

    def __init__(
        self, address: str = "auto", *, per_session_cpus: float = 1.0, per_session_memory: int | None = None,
        resources: dict[str, float] | None = None, agent_dir: str | None = None, environ: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        if per_session_cpus <= 0:
            raise PlacementError(f"--per-session-cpus must be more than 0, not {per_session_cpus:g}")
        if per_session_memory is not None and per_session_memory <= 0:
            raise PlacementError(f"--per-session-memory must be more than 0 bytes, not {per_session_memory}")
        self.address = address
        self.cpus = per_session_cpus
        self.memory = per_session_memory
        self.resources = dict(resources or {})
        environ = dict(os.environ if environ is None else environ)
        agent_dir = os.path.expanduser(agent_dir or environ.get("PI_ACTORS_DIR") or "~/.pi-actors")
        self.files = agent_files(agent_dir)
        self.env = shipped_environment(environ, self.files.get("models.json"))
        ray = _import_ray()
        self._ray = ray
        _check_reachable(address)
        try:
            if not ray.is_initialized():
                ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
        except Exception as exc:
            said = str(exc).strip().splitlines()
            raise PlacementError(f"cannot connect to the Ray cluster at {address}: {said[0] if said else type(exc).__name__}") from None
        self.slots = self._capacity(ray.cluster_resources())
        self._remote = ray.remote(_session_on_node)
        self.node = "ray"

    def _capacity(self, total: dict[str, float]) -> int:
        """How many sessions fit in the cluster's ``total`` resources at once."""
        wanted = {"CPU": self.cpus, **self.resources}
        if self.memory is not None:
            wanted["memory"] = float(self.memory)
        fits = min(int(total.get(name, 0.0) // amount) for name, amount in wanted.items() if amount > 0)
        if fits < 1:
            have = ", ".join(f"{n} {total.get(n, 0.0):g}" for n in wanted)
            self.shutdown()
            raise PlacementError(f"the Ray cluster at {self.address} has no room for one session (it has {have})")
        return fits

    def shutdown(self) -> None:
        """Disconnect from the cluster (idempotent)."""
        if self._ray.is_initialized():
            self._ray.shutdown()

    async def aclose(self) -> None:
        """Disconnect from the cluster."""
        await trio.to_thread.run_sync(self.shutdown)

    def _submit(self, job: SessionJob) -> Any:
        options: dict[str, Any] = {"num_cpus": self.cpus, "max_retries": 0, "scheduling_strategy": "SPREAD"}
        if self.memory is not None:
            options["memory"] = self.memory
        if self.resources:
            options["resources"] = self.resources
        shipped = msgspec.structs.replace(job, env={**self.env, **job.env})
        return self._remote.options(name=f"pi-actors session {job.id}", **options).remote(
            msgspec.msgpack.encode(shipped), self.files
        )

    async def run(self, job: SessionJob) -> SessionOutcome:
        """Run ``job`` as a Ray task (module docstring); never raises for its failure."""
        ray = self._ray
        started = time.time()
        ref = self._submit(job)
        try:
            await trio.to_thread.run_sync(lambda: ray.wait([ref], timeout=None), abandon_on_cancel=True)
        except BaseException:
            # Cancelled (Ctrl-C, the batch stopped): the session must not outlive its run.
            with trio.CancelScope(shield=True):
                ray.cancel(ref, force=True)
                with trio.move_on_after(_CANCEL_WAIT):
                    await trio.to_thread.run_sync(lambda: ray.wait([ref], timeout=_CANCEL_WAIT))
            raise
        try:
            data = ray.get(ref, timeout=0)
        except Exception as exc:
            return SessionOutcome(
                ok=False, node="", started=started, ended=time.time(), error_kind="infra",
                error=f"the Ray task was lost: {_ray_error(exc)}",
            )  # fmt: skip
        return msgspec.msgpack.decode(data, type=SessionOutcome)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Raise :class:`PlacementError` at once when the head at ``address`` (``host:port``)
    does not accept a TCP connection: ``ray.init`` would retry for minutes, logging as it
    goes. ``auto`` (and any address not of that form) is left to Ray."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise PlacementError(f"cannot connect to the Ray cluster at {address}: {exc.strerror or exc}") from None


def _ray_error(exc: BaseException) -> str:
    """One line for a Ray error: its class and first line."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__


# --- on the node --------------------------------------------------------------------------------


def _node_name() -> str:
    import ray

    context = ray.get_runtime_context()
    return f"{ray.util.get_node_ip_address()}/{context.get_node_id()[:12]}"


def _session_environment(environ: dict[str, str]) -> dict[str, str]:
    """The worker's environment without Ray's variables and credentials: the base of a session."""
    return {k: v for k, v in environ.items() if not k.startswith("RAY_") and not is_credential_name(k)}


def _session_on_node(job_data: bytes, files: dict[str, bytes]) -> bytes:
    """The Ray task: run the session ``job_data`` (a msgpack :class:`SessionJob`) here with
    the agent files ``files``; a msgpack :class:`SessionOutcome` with the session file by
    value. Runs in a Ray worker that may be reused: everything it makes is private to it."""
    import tempfile

    from ._local import LocalPlacement

    job = msgspec.msgpack.decode(job_data, type=SessionJob)
    node = _node_name()
    with tempfile.TemporaryDirectory(prefix="pi-actors-ray-") as private:
        agent = os.path.join(private, "agent")
        os.makedirs(agent)
        for file_name, data in files.items():
            with open(os.path.join(agent, os.path.basename(file_name)), "wb") as f:
                f.write(data)
        here = msgspec.structs.replace(job, session_dir=os.path.join(private, "sessions"), env={**job.env, "PI_ACTORS_DIR": agent})
        if job.workspace is not None:  # checked out here, in this task's private directory
            here.workspace = msgspec.structs.replace(job.workspace, directory=os.path.join(private, "workspace"))
        local = LocalPlacement(1, env=_session_environment(dict(os.environ)))
        local.node = f"node {node}"
        outcome = _in_trio_thread(local, here)
        content = None
        if outcome.session_file is not None:
            with open(outcome.session_file, encoding="utf-8") as f:
                content = f.read()
        name = os.path.basename(outcome.session_file) if outcome.session_file else None
        outcome = msgspec.structs.replace(outcome, node=node, session_file=name, session_content=content)
    return msgspec.msgpack.encode(outcome)


def _in_trio_thread(local: Any, job: SessionJob) -> SessionOutcome:
    """``local.run(job)`` under ``trio.run`` in a thread of its own; its result or error."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["outcome"] = trio.run(local.run, job)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=main, name=f"pi-actors session {job.id}", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    outcome: SessionOutcome = box["outcome"]
    return outcome
