"""Running ripgrep for ``grep`` and ``find``.

:func:`rg_path` finds the ``rg`` binary that the ``ripgrep`` PyPI wheel installs into the
environment's ``bin`` directory: next to ``sys.executable`` first (a virtualenv's ``bin``,
symlinks not resolved), then through the wheel's installed-files record, then ``PATH``.
None if there is none.

:func:`run_rg` runs ``rg`` as a :class:`~.process.GroupProcess` (own process group, dies
with the worker), hands each stdout line to a callback that may stop it early (SIGTERM, as
pi does when the limit is reached), collects stderr, and always leaves the process killed
and reaped, also when cancelled.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

import trio

from .base import ToolError
from .process import GroupProcess

_GRACE = 1.0


def _executable(candidate: str) -> str | None:
    path = os.path.normpath(candidate)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


@lru_cache(maxsize=1)
def rg_path() -> str | None:
    beside = _executable(os.path.join(os.path.dirname(sys.executable), "rg"))
    if beside is not None:
        return beside  # the usual case: no need for importlib.metadata (~25 ms to import)
    candidates: list[str] = []
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            for item in distribution("ripgrep").files or ():
                if item.name == "rg":
                    candidates.append(str(item.locate()))
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    from shutil import which

    found = which("rg")
    if found:
        candidates.append(found)
    for candidate in candidates:
        path = _executable(candidate)
        if path is not None:
            return path
    return None


class RgOutcome(NamedTuple):
    code: int | None  # exit status, None when ended by a signal
    stderr: str
    stopped: bool  # on_line asked to stop early


async def run_rg(argv: Sequence[str], *, cwd: str, on_line: Callable[[bytes], bool]) -> RgOutcome:
    """Run ``argv`` (``rg`` first); ``on_line`` gets each stdout line and returns True to stop."""
    try:
        proc = GroupProcess.spawn(list(argv), cwd=cwd, separate_stderr=True)
    except OSError as exc:
        raise ToolError(f"Failed to run ripgrep: {exc.strerror or exc}") from None
    errors: list[bytes] = []
    stopped = False

    async def collect_stderr() -> None:
        assert proc.errors is not None
        while chunk := await proc.errors.receive_some(65536):
            errors.append(chunk)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect_stderr)
            buffer = b""
            while not stopped:
                chunk = await proc.output.receive_some(65536)
                if not chunk:
                    if buffer:
                        stopped = on_line(buffer)
                    break
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    if on_line(line):
                        stopped = True
                        break
            if stopped:
                proc.signal_group(signal.SIGTERM)  # pi: child.kill()
            await proc.wait_exited()
    finally:
        with trio.CancelScope(shield=True):
            await proc.shutdown(_GRACE)
    code = proc.returncode
    return RgOutcome(code if code is not None and code >= 0 else None, b"".join(errors).decode("utf-8", "replace"), stopped)
