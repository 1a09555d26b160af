"""Sandbox policies for tool workers, on bubblewrap.

A tool worker process runs *inside* the sandbox (the pool starts ``bwrap ... python -I -m
pi_actors.actors._zygote`` once per workspace, and that zygote forks the workers), so
everything a tool does — the in-process file tools as much as the commands ``bash`` starts —
is confined by the kernel, not by checks in tool code.

Policies (:data:`MODES`):

- ``off``: no sandbox (an explicit opt-out; the pool says so on stderr). Secret-looking
  environment variables are still removed.
- ``read-only``: the whole file system read-only, a private writable ``/tmp``.
- ``workspace-write``: as ``read-only``, plus the workspace (the session's working
  directory) writable. The default on Linux (:func:`default_mode`).

Both sandboxed policies also:

- hide ``$HOME`` behind an empty read-only tmpfs, showing only an allow-list of it read-only
  (:data:`DEFAULT_HOME_ALLOW`, setting ``sandbox.homeAllow``) and the workspace when it lies
  in ``$HOME``; hide credential stores (``~/.ssh``, ``~/.aws``, ...) and ``hidden`` paths
  (agent directory, session directory, log file, server sockets and tokens) wherever they
  are, inside the workspace included (see :func:`.bwrap.hidden_paths`); then show the
  ``read_only`` paths (the session's skill directories) read-only again, wherever they are;
- give size-limited tmpfs for every writable place that is not the workspace (``/tmp``,
  ``/dev/shm``) and read-only tmpfs for ``/run`` and the masks;
- run in new PID, IPC, UTS (and, unless ``allow_network``, network) namespaces, each worker
  in a PID namespace of its own as its init (so a tool cannot signal it or anything outside,
  other calls' processes included);
- make the zygote and the workers non-dumpable, drop all capabilities in the workers, set
  no-new-privileges, and load a seccomp filter in every worker (:mod:`.seccomp`: no ptrace,
  ``process_vm_*``, ``pidfd_getfd``, keyring, bpf, perf, userfaultfd, mount or namespace
  calls) which every command it starts inherits;
- die with the pool; pass only an allow-listed environment (:mod:`.env`);
- apply resource limits (:class:`Limits`: processes, file size, memory, tmpfs sizes) — rlimits
  set by the worker on itself at start, plus a memory cgroup where the cgroup tree is writable
  and, when running as root (whom the kernel exempts from ``RLIMIT_NPROC``), a pids cgroup
  (:mod:`.limits`).

If a sandboxed policy cannot be set up (no ``bwrap``, user namespaces refused, no pids cgroup
for root, no libseccomp), :class:`SandboxUnavailable` says why; the pool turns that into the
call's error result. Nothing ever falls back to running unsandboxed.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from ...choices import SANDBOX_MODES

__all__ = [
    "MODES",
    "DEFAULT_HOME_ALLOW",
    "Limits",
    "SandboxPolicy",
    "SandboxUnavailable",
    "default_mode",
    "default_limits",
    "parse_size",
]

MODES = SANDBOX_MODES  # (defined once, in pi_actors.choices)


class SandboxUnavailable(Exception):
    """The sandbox cannot be set up; ``str(exc)`` says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-sandbox resource limits (bytes unless said otherwise).

    ``processes``: processes and threads of the sandbox (``RLIMIT_NPROC``; for root, the
    ``pids.max`` of the sandbox's cgroup). ``file_size``: largest file a process may write
    (``RLIMIT_FSIZE``). ``memory``: the memory of the whole sandbox where a memory cgroup can
    be made (cgroup v2 ``memory.max`` / v1 ``memory.limit_in_bytes``; tmpfs pages count; an
    excess gets a process OOM-killed), and in every case the largest writable private memory
    of one process (``RLIMIT_DATA``, which unlike ``RLIMIT_AS`` does not count the address
    space that runtimes such as V8 or Go merely reserve). ``tmp_size``: the private ``/tmp``
    (a tmpfs). ``shm_size``: ``/dev/shm`` (a tmpfs).
    """

    processes: int = 4096
    file_size: int = 16 * 1024**3
    memory: int = 8 * 1024**3
    tmp_size: int = 1024**3
    shm_size: int = 64 * 1024**2

    def to_config(self) -> dict[str, int]:
        return {
            "processes": self.processes,
            "fileSize": self.file_size,
            "memory": self.memory,
            "tmpSize": self.tmp_size,
            "shmSize": self.shm_size,
        }

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> Limits:
        base = default_limits()
        if not data:
            return base
        return replace(
            base,
            processes=int(data.get("processes", base.processes)),
            file_size=int(data.get("fileSize", base.file_size)),
            memory=int(data.get("memory", base.memory)),
            tmp_size=int(data.get("tmpSize", base.tmp_size)),
            shm_size=int(data.get("shmSize", base.shm_size)),
        )


def default_limits() -> Limits:
    """4096 processes, 16 GiB files, half the machine's RAM (at least 1 GiB, at most 16 GiB;
    4 GiB if unknown), a ``/tmp`` of 1 GiB (at most a quarter of the memory) and a 64 MiB
    ``/dev/shm``."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        memory = min(16 * 1024**3, max(1024**3, ram // 2))
    except (ValueError, OSError, AttributeError):
        memory = 4 * 1024**3
    return Limits(memory=memory, tmp_size=min(1024**3, memory // 4))


#: Relative to ``$HOME``: what a sandbox shows of the home directory (read-only) by default;
#: the rest of ``$HOME`` is hidden. Configuration and toolchains, no credentials.
DEFAULT_HOME_ALLOW = (".gitconfig", ".config/git", ".local/bin", ".cargo/bin", ".rustup", ".nvm", ".pyenv")

_SIZE = re.compile(r"\s*(\d{1,15}(?:\.\d{1,6})?)\s*(?:([kmgt])(?:i?b)?|b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(value: Any, what: str) -> int:
    """Bytes from a positive integer or a string such as ``"512M"``, ``"2GiB"``, ``"1.5g"``
    (K, M, G, T are binary multiples). Raises ValueError naming ``what`` for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**62:
        return value
    if isinstance(value, str) and len(value) <= 40:
        match = _SIZE.fullmatch(value)
        if match:
            number = int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])
            if 0 < number < 2**62:
                return number
    raise ValueError(f'{what}: expected a positive size such as 2147483648, "512M" or "2GiB", not {value!r}')


def _at_least(value: int, minimum: int, what: str) -> int:
    if value < minimum:
        raise ValueError(f"{what}: {value} is below the minimum of {minimum}")
    return value


def _home_relative(path: str) -> str:
    """``~/.gitconfig`` or ``.gitconfig`` → ``.gitconfig``; anything that is not a path below
    ``~`` is refused (the allow-list can only show parts of the home directory)."""
    rel = path[2:] if path.startswith("~/") else path
    if os.path.isabs(rel) or ".." in rel.split("/") or os.path.normpath(rel) in (".", "~"):
        raise ValueError(f'settings.json: sandbox.homeAllow: {path!r} is not a path inside ~ (e.g. "~/.gitconfig")')
    return os.path.normpath(rel)


_SETTINGS = ("memory", "tmpSize", "shmSize", "fileSize", "processes", "homeAllow")


@dataclass(frozen=True)
class SandboxPolicy:
    """What a tool worker may do; see the module docstring.

    ``workspace``: the directory that ``workspace-write`` makes writable (the session cwd).
    ``hidden``: extra paths to hide in every sandboxed mode, wherever they are (the agent
    directory, the session directory, the log file; a server adds its socket directory and
    token file). ``home``: the home directory to hide (default ``$HOME``); ``home_allow``:
    what of it stays visible, read-only (paths relative to it). ``read_only``: paths shown
    read-only even inside a hidden place (the skill directories, so that the model can
    ``read`` a skill listed in its system prompt; skills are text, nothing there is secret).
    """

    mode: str = "workspace-write"
    workspace: str = ""
    allow_network: bool = False
    hidden: tuple[str, ...] = ()
    limits: Limits = field(default_factory=default_limits)
    home: str | None = None
    home_allow: tuple[str, ...] = DEFAULT_HOME_ALLOW
    read_only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown sandbox mode {self.mode!r} (expected one of {', '.join(MODES)})")

    @property
    def sandboxed(self) -> bool:
        return self.mode != "off"

    def for_workspace(self, workspace: str) -> SandboxPolicy:
        return replace(self, workspace=workspace)

    def to_config(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "workspace": self.workspace,
            "allowNetwork": self.allow_network,
            "hidden": list(self.hidden),
            "limits": self.limits.to_config(),
            "home": self.home,
            "homeAllow": list(self.home_allow),
            "readOnly": list(self.read_only),
        }

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> SandboxPolicy:
        data = data or {}
        allow = data.get("homeAllow")
        return cls(
            mode=data.get("mode") or default_mode(),
            workspace=data.get("workspace") or "",
            allow_network=bool(data.get("allowNetwork", False)),
            hidden=tuple(data.get("hidden") or ()),
            limits=Limits.from_config(data.get("limits")),
            home=data.get("home"),
            home_allow=DEFAULT_HOME_ALLOW if allow is None else tuple(allow),
            read_only=tuple(data.get("readOnly") or ()),
        )

    @classmethod
    def from_settings(cls, settings: Any, **fields: Any) -> SandboxPolicy:
        """A policy of ``fields`` with the ``sandbox`` object of settings.json applied:
        ``memory``, ``tmpSize``, ``shmSize``, ``fileSize`` (bytes, or ``"512M"``, ``"2GiB"``),
        ``processes`` (a count), ``homeAllow`` (paths below ``~`` shown read-only; replaces
        the default list). Raises ValueError with a one-line reason for a bad value."""
        if settings is None:
            return cls(**fields)
        if not isinstance(settings, dict):
            raise ValueError(f"settings.json: sandbox must be an object, not {settings!r}")
        unknown = sorted(set(settings) - set(_SETTINGS))
        if unknown:
            raise ValueError(f"settings.json: unknown sandbox setting {unknown[0]!r} (known: {', '.join(_SETTINGS)})")
        limits = fields.pop("limits", None) or default_limits()
        changes: dict[str, int] = {}
        for key, attr, minimum in (
            ("memory", "memory", 32 * 1024**2),
            ("tmpSize", "tmp_size", 1024**2),
            ("shmSize", "shm_size", 1024**2),
            ("fileSize", "file_size", 1024),
        ):
            if key in settings:
                what = f"settings.json: sandbox.{key}"
                changes[attr] = _at_least(parse_size(settings[key], what), minimum, what)
        if "memory" in changes and "tmpSize" not in settings:
            changes["tmp_size"] = min(limits.tmp_size, changes["memory"] // 4)
        if "processes" in settings:
            count = settings["processes"]
            if not isinstance(count, int) or isinstance(count, bool):
                raise ValueError(f"settings.json: sandbox.processes: expected a number of processes, not {count!r}")
            changes["processes"] = _at_least(count, 16, "settings.json: sandbox.processes")
        if "homeAllow" in settings:
            allow = settings["homeAllow"]
            if not isinstance(allow, list) or not all(isinstance(p, str) for p in allow):
                raise ValueError(f"settings.json: sandbox.homeAllow: expected a list of paths below ~, not {allow!r}")
            fields["home_allow"] = tuple(_home_relative(p) for p in allow)
        return cls(limits=replace(limits, **changes), **fields)


def default_mode() -> str:
    """``workspace-write`` where bubblewrap can work (Linux), else ``off``."""
    return "workspace-write" if sys.platform.startswith("linux") else "off"
