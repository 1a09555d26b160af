"""Resource limits of a sandbox: rlimits, and a pids cgroup when running as root.

- :func:`apply_rlimits` runs in the sandboxed worker at start (inside its user namespace, so
  for an ordinary user ``RLIMIT_NPROC`` counts the sandbox's own processes): processes,
  file size, memory (``RLIMIT_DATA``) and no core files. Soft and hard limits are both set,
  so a tool cannot raise them again.
- The kernel does not apply ``RLIMIT_NPROC`` to root (real uid 0) at all, so for root the
  process limit is a cgroup: :class:`PidsCgroup` creates ``<pids hierarchy>/pi-actors/<leaf>``
  with ``pids.max``, the worker's launcher joins it before it execs ``bwrap`` (see
  :meth:`PidsCgroup.join`, safe between fork and exec), and :meth:`PidsCgroup.remove`
  deletes it after the worker is gone. Leaves left behind by a killed pool are swept by
  :func:`sweep_stale_cgroups`. Both cgroup v2 (with the pids controller) and v1 ``pids``
  hierarchies are supported; without either, root gets :class:`SandboxUnavailable`.
"""

from __future__ import annotations

import os
import resource
import secrets

from . import Limits, SandboxUnavailable

__all__ = ["apply_rlimits", "needs_pids_cgroup", "PidsCgroup", "sweep_stale_cgroups"]

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


def _pids_hierarchy() -> tuple[str, int] | None:
    """``(mount point, version)`` of a writable cgroup hierarchy with the pids controller."""
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
                    if "pids" in handle.read().split():
                        return mount_point, 2
            except OSError:
                continue
        elif fstype == "cgroup" and "pids" in options and v1 is None:
            v1 = (mount_point, 1)
    return v1


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


class PidsCgroup:
    """One sandbox's pids cgroup (root only); see the module docstring."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs = os.path.join(path, "cgroup.procs")

    @classmethod
    def create(cls, max_pids: int) -> "PidsCgroup":
        found = _pids_hierarchy()
        if found is None:
            raise SandboxUnavailable(
                "running as root, where the kernel does not enforce the process limit (RLIMIT_NPROC), "
                "and no writable cgroup hierarchy with the pids controller was found to enforce it instead"
            )
        mount_point, version = found
        parent = os.path.join(mount_point, _PARENT)
        try:
            os.makedirs(parent, exist_ok=True)
            if version == 2:
                _enable_pids(mount_point)
                _enable_pids(parent)
            leaf = os.path.join(parent, f"{os.getpid()}-{secrets.token_hex(4)}")
            os.mkdir(leaf)
            _write(os.path.join(leaf, "pids.max"), str(max_pids))
        except OSError as exc:
            raise SandboxUnavailable(f"cannot create a pids cgroup under {parent}: {exc.strerror or exc}") from None
        return cls(leaf)

    def join(self) -> None:
        """Move the calling process into the cgroup (used between fork and exec)."""
        fd = os.open(self.procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)

    def remove(self) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass  # still busy or gone; swept by the next pool

    def members(self) -> list[int]:
        try:
            with open(self.procs) as handle:
                return [int(line) for line in handle.read().split()]
        except (OSError, ValueError):
            return []

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


def _enable_pids(directory: str) -> None:
    control = os.path.join(directory, "cgroup.subtree_control")
    with open(control) as handle:
        if "pids" in handle.read().split():
            return
    _write(control, "+pids")


def sweep_stale_cgroups() -> None:
    """Remove empty leaves whose pool process (the pid in the name) no longer exists."""
    found = _pids_hierarchy()
    if found is None:
        return
    parent = os.path.join(found[0], _PARENT)
    try:
        names = os.listdir(parent)
    except OSError:
        return
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
