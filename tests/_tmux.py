"""A tmux pane running the real ``pi-actors`` for TUI tests: type with ``send-keys``, read
the screen with ``capture-pane``. A screen has no event source, so waiting for text is a
short poll of capture-pane, bounded by ``trio.fail_after``."""

from __future__ import annotations

import shlex
import uuid

import trio

from conftest import CLI

__all__ = ["Pane"]


class Pane:
    def __init__(self, env) -> None:
        self.env = env
        self.socket = f"pi-actors-test-{uuid.uuid4().hex[:10]}"
        self.exit_marker = f"EXITED-{uuid.uuid4().hex[:6]}"

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
        # The footer is drawn by the running application (the header line above it is printed
        # before the application starts): from then on keys and bracketed pastes are read.
        await self.wait_for(ready)

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", "0", *keys)

    async def type(self, text: str) -> None:
        await self.tmux("send-keys", "-t", "0", "-l", text)

    async def screen(self, *, escapes: bool = False) -> str:
        return await self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "0")

    async def wait_for(self, *texts: str, timeout: float = 20) -> str:
        screen = ""
        try:
            with trio.fail_after(timeout):
                while True:
                    screen = await self.screen()
                    if all(t in screen for t in texts):
                        return screen
                    await trio.sleep(0.1)
        except trio.TooSlowError:
            raise AssertionError(f"{texts!r} not on screen:\n{screen}") from None

    async def wait_for_gone(self, text: str, timeout: float = 20) -> None:
        with trio.fail_after(timeout):
            while text in await self.screen():
                await trio.sleep(0.1)

    async def close(self) -> None:
        await self.tmux("kill-server")
