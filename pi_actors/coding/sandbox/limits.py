"""Resource limits of a sandbox: rlimits, and cgroups (memory where possible, pids for root).

- :func:`apply_rlimits` runs in the sandboxed worker at start (inside its user namespace, so
  for an ordinary user ``RLIMIT_NPROC`` counts the sandbox's own processes): processes,
  file size, memory (``RLIMIT_DATA``, per process) and no core files. Soft and hard limits
  are both set, so a tool cannot raise them again.
- :class:`SandboxCgroup` is the sandbox's cgroup (one leaf per hierarchy, under
  ``<hierarchy>/pi-actors/<pool pid>-<random>``): a *memory* limit for the whole sandbox
  (v2 ``memory.max`` with ``memory.swap.max`` 0, v1 ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes``) wherever a writable hierarchy with the memory controller
  exists — else the per-process ``RLIMIT_DATA`` is the only memory limit — and, for root
  (real uid 0, to whom the kernel does not apply ``RLIMIT_NPROC`` at all), a *pids* limit
  (``pids.max``), without which root gets :class:`SandboxUnavailable`. The zygote's launcher
  joins it before it execs ``bwrap`` (:meth:`SandboxCgroup.join`, safe between fork and
  exec); the owner removes it once every member is gone. :meth:`SandboxCgroup.oom_kills`
  counts the processes the kernel killed for the memory limit (the pool reports them in the
  call's result). Leaves left behind by a killed pool are swept by
  :func:`sweep_stale_cgroups`. Both cgroup v2 and v1 hierarchies are supported.
"""

from __future__ import annotations

import os
import resource
import secrets

from . import Limits, SandboxUnavailable

__all__ = ["apply_rlimits", "needs_pids_cgroup", "SandboxCgroup", "sweep_stale_cgroups"]

_PARENT = "pi-actors"


def apply_rlimits(limits: Limits) -> None:
    """Lower this process's limits to ``limits`` (never raises a limit that is lower)."""
    for kind, value in (
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_DATA, limits.memory),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))


def needs_pids_cgroup() -> bool:
    """True when RLIMIT_NPROC would not be enforced (real uid 0)."""
    return os.getuid() == 0


def _hierarchy(controller: str) -> tuple[str, int] | None:
    """``(mount point, version)`` of a writable cgroup hierarchy with ``controller`` (v2
    preferred)."""
    v1 = None
    try:
        with open("/proc/self/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point = fields[4].replace("\\040", " ")
        fstype, options = tail[0], tail[2].split(",")
        if not os.access(mount_point, os.W_OK):
            continue
        if fstype == "cgroup2":
            try:
                with open(os.path.join(mount_point, "cgroup.controllers")) as handle:
                    if controller in handle.read().split():
                        return mount_point, 2
            except OSError:
                continue
        elif fstype == "cgroup" and controller in options and v1 is None:
            v1 = (mount_point, 1)
    return v1


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _enable(directory: str, controller: str) -> None:
    control = os.path.join(directory, "cgroup.subtree_control")
    with open(control) as handle:
        if controller in handle.read().split():
            return
    _write(control, f"+{controller}")


class SandboxCgroup:
    """One sandbox's cgroup leaves (one per hierarchy); see the module docstring.

    ``memory_limit``: the sandbox's memory limit in bytes, None when no memory cgroup could
    be made (the per-process rlimit is then the only one)."""

    def __init__(self, leaves: list[str], memory_events: str | None, memory_limit: int | None) -> None:
        self.leaves = leaves
        self.memory_events = memory_events
        self.memory_limit = memory_limit
        self._events_fd = -1  # memory_events, kept open by oom_kills (closed by remove)

    @classmethod
    def create(cls, limits: Limits, *, need_pids: bool) -> SandboxCgroup | None:
        """The sandbox's cgroup, or None when there is nothing to limit by cgroup here.
        Raises SandboxUnavailable when ``need_pids`` and no pids cgroup can be made."""
        tag = f"{os.getpid()}-{secrets.token_hex(4)}"
        made: dict[tuple[str, int], str] = {}
        memory_events = None
        memory_limit = None

        def leaf_for(found: tuple[str, int], controller: str) -> str:
            mount_point, version = found
            parent = os.path.join(mount_point, _PARENT)
            os.makedirs(parent, exist_ok=True)
            if version == 2:
                _enable(mount_point, controller)
                _enable(parent, controller)
            if found not in made:
                made[found] = os.path.join(parent, tag)
                os.mkdir(made[found])
            return made[found]

        try:
            if need_pids:
                found = _hierarchy("pids")
                if found is None:
                    raise SandboxUnavailable(
                        "running as root, where the kernel does not enforce the process limit (RLIMIT_NPROC), "
                        "and no writable cgroup hierarchy with the pids controller was found to enforce it instead"
                    )
                try:
                    _write(os.path.join(leaf_for(found, "pids"), "pids.max"), str(limits.processes))
                except OSError as exc:
                    raise SandboxUnavailable(
                        f"cannot create a pids cgroup under {os.path.join(found[0], _PARENT)}: {exc.strerror or exc}"
                    ) from None
            found = _hierarchy("memory")
            if found is not None:
                try:
                    leaf = leaf_for(found, "memory")
                    if found[1] == 2:
                        _write(os.path.join(leaf, "memory.max"), str(limits.memory))
                        _write_if_present(os.path.join(leaf, "memory.swap.max"), "0")
                        memory_events = os.path.join(leaf, "memory.events")
                    else:
                        _write(os.path.join(leaf, "memory.limit_in_bytes"), str(limits.memory))
                        _write_if_present(os.path.join(leaf, "memory.memsw.limit_in_bytes"), str(limits.memory))
                        memory_events = os.path.join(leaf, "memory.oom_control")
                    memory_limit = limits.memory
                except OSError:
                    # No memory cgroup after all: RLIMIT_DATA still limits each process.
                    memory_events = None
        except BaseException:
            cls(list(made.values()), None, None).remove()
            raise
        if not made:
            return None
        return cls(list(made.values()), memory_events, memory_limit)

    def join(self) -> None:
        """Move the calling process into every leaf (used between fork and exec)."""
        for leaf in self.leaves:
            fd = os.open(os.path.join(leaf, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def oom_kills(self) -> int:
        """How many of the sandbox's processes the kernel has killed for the memory limit.

        Read twice per sandboxed call (before and after), so the file is opened once and
        each read is one ``pread`` at offset 0 (a cgroup file is generated afresh at each
        read from the start): a few µs instead of an open, five syscalls and a close."""
        if self.memory_events is None:
            return 0
        try:
            if self._events_fd < 0:
                self._events_fd = os.open(self.memory_events, os.O_RDONLY | os.O_CLOEXEC)
            data = os.pread(self._events_fd, 4096, 0)
        except OSError:
            return 0
        for line in data.split(b"\n"):
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                try:
                    return int(value)
                except ValueError:
                    break
        return 0

    def remove(self) -> None:
        if self._events_fd >= 0:
            os.close(self._events_fd)
            self._events_fd = -1
        for leaf in self.leaves:
            try:
                os.rmdir(leaf)
            except OSError:
                pass  # still busy or gone; swept by the next pool

    def members(self) -> list[int]:
        pids: set[int] = set()
        for leaf in self.leaves:
            try:
                with open(os.path.join(leaf, "cgroup.procs")) as handle:
                    pids.update(int(line) for line in handle.read().split())
            except (OSError, ValueError):
                continue
        return sorted(pids)

    async def remove_when_empty(self, timeout: float = 5.0) -> None:
        """Wait (through pidfds) until every member has exited, then remove the cgroup."""
        import trio

        with trio.move_on_after(timeout):
            while members := self.members():
                for pid in members:
                    try:
                        fd = os.pidfd_open(pid)
                    except OSError:
                        continue  # already gone
                    try:
                        await trio.lowlevel.wait_readable(fd)
                    finally:
                        trio.lowlevel.notify_closing(fd)
                        os.close(fd)
        self.remove()


def _write_if_present(path: str, text: str) -> None:
    try:
        _write(path, text)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # swap accounting off: nothing to limit


def sweep_stale_cgroups() -> None:
    """Remove empty leaves whose pool process (the pid in the name) no longer exists."""
    for controller in ("pids", "memory"):
        found = _hierarchy(controller)
        if found is None:
            continue
        parent = os.path.join(found[0], _PARENT)
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            owner = name.split("-", 1)[0]
            if not owner.isdigit() or int(owner) == os.getpid():
                continue
            try:
                os.kill(int(owner), 0)
                continue  # the pool that made it still runs
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass
