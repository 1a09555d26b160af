"""The seccomp filter a sandboxed worker loads: built once by the zygote, loaded as its BPF
program by each worker, and it denies what it must (in a forked child, as a worker is)."""

from __future__ import annotations

import ctypes
import errno
import os

import pytest

from pi_actors.coding.sandbox import SandboxUnavailable, seccomp

_NR_UNSHARE, _NR_CLONE3, _NR_KEYCTL = 272, 435, 250
_CLONE_NEWUSER = 0x10000000


def _in_child(body) -> int:
    """Run ``body`` in a forked child (a filter cannot be removed); its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(body())
        except BaseException:
            os._exit(99)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86-64")
def test_the_prepared_filter_loads_as_one_program_and_denies_namespaces_clone3_and_the_keyring():
    try:
        seccomp.prepare()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    assert seccomp._prepared_bpf and len(seccomp._prepared_bpf) % 8 == 0

    def body() -> int:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(38, 1, 0, 0, 0)  # no_new_privs, as the worker has
        seccomp._prepared = None  # the program alone must do: no libseccomp at load time
        seccomp.load_filter()
        with open("/proc/self/status") as handle:
            status = dict(line.split(":\t", 1) for line in handle if ":\t" in line)
        checks = [
            status.get("Seccomp", "").strip() == "2",
            status.get("Seccomp_filters", "1").strip() == "1",
            libc.syscall(_NR_UNSHARE, _CLONE_NEWUSER) == -1 and ctypes.get_errno() == errno.EPERM,
            libc.syscall(_NR_CLONE3, 0, 0) == -1 and ctypes.get_errno() == errno.ENOSYS,
            libc.syscall(_NR_KEYCTL, 0, -3, 0) == -1 and ctypes.get_errno() == errno.EPERM,
            os.getpid() > 0,
        ]
        return sum(1 << i for i, ok in enumerate(checks) if not ok)

    assert _in_child(body) == 0
