"""A tmux pane running the real ``pi-actors`` for TUI tests: type with ``send-keys``, read
the screen with ``capture-pane``.

Waiting for the screen without polling: ``pipe-pane`` copies everything the program writes
to the pane into a FIFO we hold open. A waiter checks the screen, and if it is not there yet,
waits for the program's next output before it looks again — the screen only changes when
the program writes. (tmux parses a read into the pane's grid in the same callback that passes
it to the pipe, and handles our ``capture-pane`` after that, so the new output is on the
screen we capture.) Each wait is bounded by ``trio.fail_after``."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Callable

import trio
from conftest import CLI

__all__ = ["Pane"]


class Pane:
    def __init__(self, env) -> None:
        self.env = env
        self.socket = f"pi-actors-test-{uuid.uuid4().hex[:10]}"
        self.exit_marker = f"EXITED-{uuid.uuid4().hex[:6]}"
        self._dir = tempfile.mkdtemp(prefix="pi-actors-pane-")
        self._output: trio.lowlevel.FdStream | None = None

    async def tmux(self, *args: str) -> str:
        proc = await trio.run_process(
            ["tmux", "-L", self.socket, *args], capture_stdout=True, capture_stderr=True, check=False, env=self.env.env
        )
        return proc.stdout.decode("utf-8", "replace")

    async def start(self, *cli_args: str, env_prefix: str = "", session: bool = False, ready: str = "(scripted) scripted-model") -> None:
        """``pi-actors --model scripted/scripted-model [--no-session] ARGS`` in the pane."""
        flags = [] if session else ["--no-session"]
        await self.start_argv([CLI, "--model", "scripted/scripted-model", *flags, *cli_args], env_prefix=env_prefix, ready=ready)

    async def start_argv(self, argv: list[str], *, env_prefix: str = "", ready: str) -> None:
        """Run ``argv`` in a new 100x40 pane (cwd: the env's work folder) and wait for ``ready``."""
        command = env_prefix + " ".join(shlex.quote(a) for a in argv)
        await self.tmux(
            "new-session", "-d", "-x", "100", "-y", "40", "-c", str(self.env.work),
            f"{command}; echo {self.exit_marker}; sleep 60",
        )
        fifo = os.path.join(self._dir, "output")
        os.mkfifo(fifo)
        # Read-write: the FIFO never reports end-of-file, and cat's open does not wait for us.
        self._output = trio.lowlevel.FdStream(os.open(fifo, os.O_RDWR))
        await self.tmux("pipe-pane", "-t", "0", f"cat >> {shlex.quote(fifo)}")
        # The footer is drawn by the running application (the header line above it is printed
        # before the application starts): from then on keys and bracketed pastes are read.
        await self.wait_for(ready)

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", "0", *keys)

    async def type(self, text: str) -> None:
        await self.tmux("send-keys", "-t", "0", "-l", text)

    async def screen(self, *, escapes: bool = False) -> str:
        return await self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "0")

    async def wait_until(self, done: Callable[[str], bool], timeout: float = 20, *, escapes: bool = False) -> str:
        """The screen (with its colour escapes if ``escapes``), once ``done(screen)``;
        AssertionError showing the screen after ``timeout``."""
        assert self._output is not None, "start the pane first"
        screen = ""
        try:
            with trio.fail_after(timeout):
                while not done(screen := await self.screen(escapes=escapes)):
                    await self._output.receive_some(65536)  # the program wrote: look again
        except trio.TooSlowError:
            raise AssertionError(f"not on screen in {timeout:g} s:\n{screen}") from None
        return screen

    async def wait_for(self, *texts: str, timeout: float = 20) -> str:
        try:
            return await self.wait_until(lambda screen: all(t in screen for t in texts), timeout)
        except AssertionError as exc:
            raise AssertionError(f"{texts!r} {exc}") from None

    async def wait_for_answer(self, *texts: str, timeout: float = 20) -> str:
        """The screen once ``texts`` are on it and the run is over: the live area is drawn
        (the editor between its rules) without the spinner. An answer is printed at its
        message's end, before the run ends and before the session has its entry — a slash
        command typed at that moment (``/tree``, ``/session``) sees the run still going."""

        def done(screen: str) -> bool:
            rules = sum(line.startswith("────") for line in screen.splitlines())
            return all(t in screen for t in texts) and rules >= 2 and "esc to abort" not in screen

        try:
            return await self.wait_until(done, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{texts!r} with the run over: {exc}") from None

    async def wait_for_gone(self, text: str, timeout: float = 20) -> None:
        await self.wait_until(lambda screen: text not in screen, timeout)

    async def close(self) -> None:
        await self.tmux("kill-server")
        if self._output is not None:
            await self._output.aclose()
        shutil.rmtree(self._dir, ignore_errors=True)
