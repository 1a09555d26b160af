"""Placement: where whole sessions run, behind one interface.

The batch runner (``pi-actors batch``) asks a :class:`Placement` to run each task's session
and gets a :class:`SessionOutcome` back; it does not know where the session ran.
Implementations, chosen by configuration (:func:`make_placement`):

Served sessions (``pi-actors serve``) are *opened* rather than run: a placement's
``open_session(config, ...)`` (:class:`SessionHost`, ``_serve``) yields where to reach the
session's coordinator — on this machine (:class:`LocalPlacement`), or on another node with
its store staying on the server (:class:`NodeSessions` over a :class:`NodeLauncher`: Ray,
or :class:`ProcessNodes` for a node stood in by a local process).

- ``local`` (:class:`LocalPlacement`): each session is a headless ``pi-actors --mode json``
  process on this machine, with its usual actor runtime; ``slots`` at once.
- ``ray`` (:class:`RayPlacement`, the ``ray`` extra): each session
  is one Ray task with the declared resources (CPUs, memory, custom resources) that calls
  ``LocalPlacement(1).run(job)`` *on the worker node* — the session's actors and sandboxed
  tool pool run together on that node, trio in a thread of the worker — and returns the
  outcome with ``session_content`` filled (the file read on the node) and ``node`` set to the
  node's address; a worker or node lost while the task runs is an ``infra`` outcome, which
  the runner retries. Ray itself is imported only when this placement is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._api import ErrorKind, Limits, Placement, PlacementError, SessionJob, SessionOutcome
from ._events import EventFold, classify_model_error
from ._local import LocalPlacement, default_command
from ._paths import from_root, in_root, rebase_paths, rebase_prompt_cwd
from ._ray import RayPlacement, shipped_environment
from ._ray_serve import RayNodes, RayToolHost
from ._serve import NodeLauncher, NodeSessions, PlacedSession, ProcessNodes, SessionHost, open_local_session
from ._workspace import Checkout, checkout, is_url, rewrite_header_cwd, session_cwd

__all__ = [
    "PLACEMENTS",
    "Checkout",
    "checkout",
    "is_url",
    "rewrite_header_cwd",
    "session_cwd",
    "ErrorKind",
    "EventFold",
    "Limits",
    "LocalPlacement",
    "NodeLauncher",
    "NodeSessions",
    "PlacedSession",
    "ProcessNodes",
    "SessionHost",
    "open_local_session",
    "Placement",
    "PlacementError",
    "RayNodes",
    "RayPlacement",
    "RayToolHost",
    "SessionJob",
    "SessionOutcome",
    "classify_model_error",
    "default_command",
    "make_placement",
    "from_root",
    "in_root",
    "rebase_paths",
    "rebase_prompt_cwd",
    "make_session_host",
    "shipped_environment",
]


#: Placement kinds by configuration name -> a factory taking the kind's options.
PLACEMENTS: dict[str, Callable[..., Placement]] = {"local": LocalPlacement, "ray": RayPlacement}


def make_session_host(kind: str, **options: Any) -> SessionHost:
    """The placement of served sessions ``kind`` (``local``; ``ray``: ``address``,
    ``num_cpus``, ``resources`` — :class:`~._ray_serve.RayNodes` — ``tool_hosts``, the
    custom resources of each session's tool host, checked against the cluster, and
    ``workspace``, ``(server root, node root)`` when the nodes keep the root elsewhere) for
    ``pi-actors serve``; raises :class:`PlacementError` for an unknown kind or a placement
    that cannot be made (Ray not installed or not reachable)."""
    if kind == "local":
        return LocalPlacement(1)
    if kind == "ray":
        from ._ray_serve import RayNodes

        tool_hosts = options.pop("tool_hosts", None)
        workspace = options.pop("workspace", None)
        nodes = RayNodes(**options)
        if tool_hosts:
            try:
                nodes.check_resources(tool_hosts, "--ray-tool-hosts")
            except PlacementError:
                nodes.shutdown()
                raise
        return NodeSessions(nodes, link_host=nodes.link_host, tool_hosts=tool_hosts, workspace=workspace)
    raise PlacementError(f"unknown placement {kind!r} (known: local, ray)")


def make_placement(kind: str, **options: Any) -> Placement:
    """The placement ``kind`` (a key of :data:`PLACEMENTS`) made with ``options`` (``local``:
    ``slots``, ``command``, ``env``; ``ray``: ``address``, ``per_session_cpus``,
    ``per_session_memory``, ``resources``, ``agent_dir``, ``environ``). Raises
    :class:`PlacementError` for an unknown kind, options it refuses, or (``ray``) a missing
    Ray or an unreachable cluster."""
    factory = PLACEMENTS.get(kind)
    if factory is None:
        raise PlacementError(f"unknown placement {kind!r} (known: {', '.join(PLACEMENTS)})")
    try:
        return factory(**options)
    except ValueError as exc:
        raise PlacementError(str(exc)) from None
