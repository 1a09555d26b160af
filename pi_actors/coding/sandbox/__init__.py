"""Sandbox policies for tool workers, on bubblewrap.

A tool worker process runs *inside* the sandbox (the pool starts ``bwrap ... python -m
pi_actors.actors._zygote`` once per workspace, and that zygote forks the workers), so
everything a tool does — the in-process file tools as much as the commands ``bash`` starts —
is confined by the kernel, not by checks in tool code.

Policies (:data:`MODES`):

- ``off``: no sandbox (an explicit opt-out; the pool says so on stderr). Secret-looking
  environment variables are still removed.
- ``read-only``: the whole file system read-only, a private writable ``/tmp``.
- ``workspace-write``: as ``read-only``, plus the workspace (the session's working
  directory) writable. The default on Linux (:func:`default_mode`).

Both sandboxed policies also: hide credential stores and the session files (``~/.ssh``,
``~/.gnupg``, ``~/.aws``, ..., ``$PI_ACTORS_DIR``, the session directory — see
:func:`.bwrap.hidden_paths`); replace ``/run`` (service sockets) with an empty tmpfs; run in
new PID, IPC, UTS (and, unless ``allow_network``, network) namespaces, each worker in a PID
namespace of its own as its init (so a tool cannot signal it or anything outside, other
calls' processes included); drop all capabilities in the workers,
set no-new-privileges and a new session; die with the pool; pass only an allow-listed
environment (:mod:`.env`); and apply resource limits (:class:`Limits`: processes, file size,
memory) — rlimits set by the worker on itself at start, plus, when running as root (whom the
kernel exempts from ``RLIMIT_NPROC``), a pids cgroup (:mod:`.limits`).

If a sandboxed policy cannot be set up (no ``bwrap``, user namespaces refused, no pids cgroup
for root), :class:`SandboxUnavailable` says why; the pool turns that into the call's error
result. Nothing ever falls back to running unsandboxed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["MODES", "Limits", "SandboxPolicy", "SandboxUnavailable", "default_mode", "default_limits"]

MODES = ("off", "read-only", "workspace-write")


class SandboxUnavailable(Exception):
    """The sandbox cannot be set up; ``str(exc)`` says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-sandbox resource limits.

    ``processes``: processes and threads of the sandbox (``RLIMIT_NPROC``; for root, the
    ``pids.max`` of the sandbox's cgroup). ``file_size``: largest file a process may write,
    bytes (``RLIMIT_FSIZE``). ``memory``: largest writable private memory of one process,
    bytes (``RLIMIT_DATA``, which unlike ``RLIMIT_AS`` does not count the address space that
    runtimes such as V8 or Go merely reserve).
    """

    processes: int = 4096
    file_size: int = 16 * 1024**3
    memory: int = 8 * 1024**3

    def to_config(self) -> dict[str, int]:
        return {"processes": self.processes, "fileSize": self.file_size, "memory": self.memory}

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> "Limits":
        base = default_limits()
        if not data:
            return base
        return replace(
            base,
            processes=int(data.get("processes", base.processes)),
            file_size=int(data.get("fileSize", base.file_size)),
            memory=int(data.get("memory", base.memory)),
        )


def default_limits() -> Limits:
    """4096 processes, 16 GiB files, and at most the machine's RAM (8 GiB if unknown)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 * 1024**3
    return Limits(memory=max(1024**3, ram))


@dataclass(frozen=True)
class SandboxPolicy:
    """What a tool worker may do; see the module docstring.

    ``workspace``: the directory that ``workspace-write`` makes writable (the session cwd).
    ``hidden``: extra paths to hide (the agent directory, the session directory).
    ``home``: whose credential stores to hide (default ``$HOME``).
    """

    mode: str = "workspace-write"
    workspace: str = ""
    allow_network: bool = False
    hidden: tuple[str, ...] = ()
    limits: Limits = field(default_factory=default_limits)
    home: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown sandbox mode {self.mode!r} (expected one of {', '.join(MODES)})")

    @property
    def sandboxed(self) -> bool:
        return self.mode != "off"

    def for_workspace(self, workspace: str) -> "SandboxPolicy":
        return replace(self, workspace=workspace)

    def to_config(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "workspace": self.workspace,
            "allowNetwork": self.allow_network,
            "hidden": list(self.hidden),
            "limits": self.limits.to_config(),
            "home": self.home,
        }

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> "SandboxPolicy":
        data = data or {}
        return cls(
            mode=data.get("mode") or default_mode(),
            workspace=data.get("workspace") or "",
            allow_network=bool(data.get("allowNetwork", False)),
            hidden=tuple(data.get("hidden") or ()),
            limits=Limits.from_config(data.get("limits")),
            home=data.get("home"),
        )


def default_mode() -> str:
    """``workspace-write`` where bubblewrap can work (Linux), else ``off``."""
    return "workspace-write" if sys.platform.startswith("linux") else "off"
