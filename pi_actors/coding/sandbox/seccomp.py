"""The seccomp filter of a sandboxed tool worker and of every command it starts.

:func:`load_filter` builds the filter with libseccomp (through ``pyseccomp``, a ctypes
binding API-compatible with libseccomp's own Python bindings) and loads it into the calling
process. It is loaded by each worker after it has set up its namespaces and dropped every
capability (the zygote, which still needs ``mount``/``unshare`` to make each worker's
namespaces, has none); a filter cannot be removed and is inherited across ``fork`` and
``execve``, so it covers the worker's in-process tools and every command.

Everything is allowed but these, which fail with ``EPERM``:

- tracing and reading or writing other processes' memory or descriptors: ``ptrace``,
  ``process_vm_readv``/``process_vm_writev``, ``pidfd_getfd``, ``kcmp``;
- the kernel keyring: ``keyctl``, ``add_key``, ``request_key``;
- kernel attack surface no tool needs: ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*`` (its operations bypass this filter), ``open_by_handle_at``/
  ``name_to_handle_at``, ``kexec_*``, ``*_module``, ``reboot``, ``swapon``/``swapoff``,
  ``acct``, ``quotactl``, ``syslog``, ``iopl``/``ioperm``, ``settimeofday``/
  ``clock_settime``/``clock_adjtime``/``adjtimex``, ``lookup_dcookie``, ``uselib``,
  ``vhangup``, ``fanotify_init``, ``chroot``;
- mounts and namespaces: ``mount``, ``umount2``, ``pivot_root``, ``move_mount``,
  ``open_tree``, ``fsopen``, ``fsmount``, ``fsconfig``, ``fspick``, ``mount_setattr``,
  ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag.

``clone3`` fails with ``ENOSYS`` (its flags are in memory, where a filter cannot look): the
C library then falls back to ``clone``, whose flags are checked. Syscalls of another
architecture (32-bit ``int 0x80`` on x86-64) kill the process (libseccomp's default).

The zygote builds the filter once (:func:`prepare`) and keeps it as the BPF program libseccomp
generates for it (``seccomp_export_bpf``); each worker it forks loads that program with one
``prctl(PR_SET_SECCOMP)`` — what ``seccomp_load`` does after generating the very same program,
which cost each worker ~1 ms of CPU (no-new-privileges, which ``seccomp_load`` also sets, is
already set by then: the load refuses otherwise).

:func:`check_available` is the pool's early check: the library loads and the filter builds,
else :class:`~pi_actors.coding.sandbox.SandboxUnavailable`.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

from . import SandboxUnavailable

__all__ = ["DENIED", "CLONE_NAMESPACE_FLAGS", "build_filter", "prepare", "load_filter", "check_available"]

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "lookup_dcookie",
    "uselib",
    "vhangup",
    "fanotify_init",
    "chroot",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
)

# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
# CLONE_NEWNET. (CLONE_NEWTIME, 0x80, is the exit signal's byte in clone()'s flags.)
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


def _library() -> Any:
    from ..._libraries import without_ldconfig

    try:
        with without_ldconfig():  # pyseccomp looks up libc and libseccomp as it is imported
            import pyseccomp
    except (ImportError, OSError) as exc:
        raise SandboxUnavailable(
            f"the sandbox needs libseccomp (the system package libseccomp2) and the Python package "
            f"pyseccomp, and they could not be loaded: {exc}"
        ) from None
    return pyseccomp


def build_filter() -> Any:
    """The filter, not loaded (a ``pyseccomp.SyscallFilter``). Raises SandboxUnavailable."""
    seccomp = _library()
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        deny = seccomp.ERRNO(errno.EPERM)
        for name in DENIED:
            try:
                rules.add_rule(deny, name)
            except (OSError, ValueError, RuntimeError):
                # A syscall this architecture does not have (iopl on arm64, say) cannot be
                # called here either: nothing to deny.
                if _known(seccomp, name):
                    raise
        for flag in CLONE_NAMESPACE_FLAGS:
            rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    except SandboxUnavailable:
        raise
    except Exception as exc:
        raise SandboxUnavailable(f"the sandbox's seccomp filter could not be built: {exc}") from None
    return rules


def _known(seccomp: Any, name: str) -> bool:
    try:
        return seccomp.resolve_syscall(seccomp.system_arch(), name) >= 0
    except Exception:
        return False


_prepared: Any = None
_prepared_bpf: bytes | None = None  # the prepared filter as the BPF program libseccomp made of it

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_BPF_INSTRUCTION = 8  # bytes of a struct sock_filter


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def prepare() -> None:
    """Build the filter ahead, and its BPF program (the zygote does, so that each worker it
    forks only loads it). Raises SandboxUnavailable."""
    global _prepared, _prepared_bpf
    _prepared = build_filter()
    _prepared_bpf = _export(_prepared)


def _export(rules: Any) -> bytes | None:
    """The BPF program ``seccomp_load`` would load for ``rules`` (None: not available)."""
    read_fd, write_fd = os.pipe()  # a program has at most 4096 instructions: 32 KiB
    try:
        with os.fdopen(write_fd, "wb", closefd=True) as sink:
            rules.export_bpf(sink)
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
        program = b"".join(chunks)
    except Exception:
        return None
    finally:
        os.close(read_fd)
    if not program or len(program) % _BPF_INSTRUCTION or len(program) // _BPF_INSTRUCTION > 4096:
        return None
    return program


def _load_program(program: bytes) -> None:
    """``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program)``; raises OSError."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // _BPF_INSTRUCTION, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def load_filter() -> None:
    """Load the filter (built by :func:`prepare`, else now) into this process (no-new-
    privileges must be set, or CAP_SYS_ADMIN held). Irrevocable. Raises SandboxUnavailable."""
    try:
        if _prepared_bpf is not None:
            _load_program(_prepared_bpf)
        else:
            (_prepared if _prepared is not None else build_filter()).load()
    except SandboxUnavailable:
        raise
    except Exception as exc:
        raise SandboxUnavailable(f"the sandbox's seccomp filter could not be loaded: {exc}") from None


def check_available() -> None:
    """Raises SandboxUnavailable unless the filter can be built here."""
    build_filter()
