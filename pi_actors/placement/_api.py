"""The placement contract: where one headless session runs, and what comes back.

A :class:`Placement` runs whole sessions: the batch runner (and later the server) hands it a
:class:`SessionJob` and gets a :class:`SessionOutcome`. It never raises for a session that
failed: every failure is an outcome with ``error_kind`` ``"infra"`` (the machinery failed:
the model server unreachable or overloaded, a session process killed, a workspace that could
not be made — worth retrying elsewhere) or ``"agent"`` (the session ran and failed on its
own: the model's error reply, a limit reached, a task the CLI refused — retrying would fail
again). Cancellation of ``run`` stops the session and leaves no process behind.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import msgspec

from ._workspace import Checkout

__all__ = ["ErrorKind", "Limits", "Placement", "PlacementError", "SessionJob", "SessionOutcome"]

ErrorKind = Literal["infra", "agent"]


class PlacementError(Exception):
    """A placement that cannot be made from the configuration (one line, for the user)."""


class Limits(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What a session may spend: assistant turns, tokens (the sum of every reply's
    ``totalTokens``) and wall time in seconds. None: no limit. Reaching one stops the session
    with an ``agent`` failure."""

    turns: int | None = None
    tokens: int | None = None
    wall_time: float | None = None


class SessionJob(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One headless session to run.

    ``prompts``: the user messages, one run each, in order. ``cwd``: the directory the
    session works in — absolute, or relative to the workspace root when ``root`` is set.
    ``root``: the driver's workspace root (absolute) or None; ``node_root``: the same root
    where the session runs (None: the same path as ``root``). The placement resolves
    ``cwd`` under ``node_root`` and writes the driver's path (under ``root``) into the
    session file's header (``_workspace``). ``workspace``: a git repository and ref checked
    out into a fresh directory *where the session runs*, which is then its working directory
    (``cwd`` is unused); a failed checkout is an ``infra`` outcome. ``model``:
    ``provider/id`` or None for the configured default. ``tools``: the active tools (None:
    the defaults; ``[]``: none). ``session_dir``: an absolute directory where the session
    file is written (a remote placement returns the file by value instead). ``env``: extra
    environment variables for the session's processes (e.g. ``PI_ACTORS_DIR``)."""

    id: str
    prompts: list[str]
    cwd: str
    session_dir: str
    model: str | None = None
    tools: list[str] | None = None
    limits: Limits = msgspec.field(default_factory=Limits)
    attempt: int = 1
    env: dict[str, str] = {}
    root: str | None = None
    node_root: str | None = None
    workspace: Checkout | None = None


class SessionOutcome(msgspec.Struct, kw_only=True):
    """How a session ended. ``text``: the final assistant text; ``usage``: the summed usage
    of every reply (``input``, ``output``, ``cacheRead``, ``cacheWrite``, ``totalTokens``);
    ``cost``: its summed cost in dollars; ``turns``: assistant turns started;
    ``session_file``: the file written (None if none was); ``session_content``: the file's
    text when it lives on another node (None here); ``node``: the host it ran on;
    ``started``/``ended``: Unix times."""

    ok: bool
    text: str = ""
    usage: dict[str, int] = {}
    cost: float = 0.0
    turns: int = 0
    session_file: str | None = None
    session_content: str | None = None
    node: str = ""
    started: float = 0.0
    ended: float = 0.0
    error_kind: ErrorKind | None = None
    error: str | None = None


@runtime_checkable
class Placement(Protocol):
    """Where sessions run. ``name``: what the configuration calls it (``local``, ``ray``);
    ``slots``: how many sessions it runs at once (the runner starts no more than that).

    ``run(job)`` runs one session to its end and returns its outcome (never raises for the
    session's own failure; cancelled, it stops the session). ``aclose()`` releases what the
    placement holds (a cluster connection); the runner calls it once at the end."""

    name: str
    slots: int

    async def run(self, job: SessionJob) -> SessionOutcome: ...

    async def aclose(self) -> None: ...
