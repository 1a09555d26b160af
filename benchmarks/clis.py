"""The two command lines under test, configured for the benchmark's scripted server.

* :class:`PiActors` — this repository's ``pi-actors`` (the one next to the running Python),
  configured through ``$PI_ACTORS_DIR/models.json``.
* :class:`Pi` — pi's TypeScript CLI (``@mariozechner/pi-coding-agent``), configured through
  ``$PI_CODING_AGENT_DIR/models.json`` (the same format), with ``PI_OFFLINE=1`` so it makes
  no start-up network request of its own.

Both get the model ``scripted/scripted-model`` on the server's OpenAI chat-completions
endpoint, their default tools, and ``--no-session`` unless the scenario wants durable session
writes (then a fresh ``--session-dir``); print mode ``-p``, or pi's JSON-lines RPC mode
(``--mode rpc``), or the interactive TUI. ``session_holder(root)`` names the process of a
running CLI that holds the session (pi-actors' coordinator actor; pi's one node process).

Finding pi (:func:`find_pi`): ``$PI_PEER_CLI`` if set, else the cache folder's
``node_modules/.bin/pi`` (``$PI_BENCH_CACHE``, default ``~/.cache/pi-actors-bench/pi``);
``--install-pi`` puts it there with ``npm install``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["PiActors", "Pi", "find_pi", "install_pi", "pi_cache_dir", "PI_PACKAGE"]

PI_PACKAGE = "@mariozechner/pi-coding-agent@0.73"
MODEL_PROVIDER = "scripted"
MODEL_ID = "scripted-model"


def models_json(port: int) -> str:
    return json.dumps(
        {
            "providers": {
                MODEL_PROVIDER: {
                    "baseUrl": f"http://127.0.0.1:{port}/v1",
                    "api": "openai-completions",
                    "apiKey": "bench-key",
                    "models": [{"id": MODEL_ID}],
                }
            }
        }
    )


def _base_env() -> dict[str, str]:
    """Our environment without provider keys (neither CLI may find a real provider)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not (k.endswith("_API_KEY") or k.startswith(("ANTHROPIC_", "OPENAI_", "PI_CODING_AGENT_")))
    }


class _CLI:
    name = ""
    short = ""

    def __init__(self, home: Path, port: int) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        (home / "models.json").write_text(models_json(port))

    def argv(self, prompt: str | None, *, session_dir: str | None = None, interactive: bool = False,
             rpc: bool = False) -> list[str]:
        raise NotImplementedError

    def _mode_args(self, prompt: str | None, interactive: bool, rpc: bool) -> list[str]:
        if rpc:
            return ["--mode", "rpc"]
        return [] if interactive else ["-p", prompt or ""]

    def session_holder(self, root: int) -> int | None:
        """The pid of the process of the running CLI ``root`` that holds the session."""
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    #: a regular expression (bytes) whose appearance on the terminal means "ready for input"
    ready_marker: bytes = b""


class PiActors(_CLI):
    name = "pi-actors"
    short = "pi-actors"
    # The TUI's footer names the provider and the model (drawn once the runtime answered the
    # session calls; the model id may be split by a cursor move at the right edge); the plain
    # line loop (a dumb terminal) prints "> " once the runtime is up.
    ready_marker = rb"(?m)\(scripted\) scripted-mode|^> "

    def __init__(self, home: Path, port: int, executable: str | None = None) -> None:
        super().__init__(home, port)
        self.executable = executable or str(Path(sys.executable).with_name("pi-actors"))

    def version(self) -> str:
        done = subprocess.run([self.executable, "--version"], capture_output=True, text=True, timeout=30)
        return done.stdout.strip()

    def sandbox_note(self) -> str:
        """What the CLI says about sandboxing (the default is what gets measured: no flag)."""
        import re

        done = subprocess.run([self.executable, "--help"], capture_output=True, text=True, timeout=30)
        if "--sandbox" not in done.stdout:
            return "no sandbox in this build (pi-actors --help has no --sandbox option)"
        text = " ".join(done.stdout.split())
        m = re.search(r"([a-z-]+) \(default", text[text.rfind("--sandbox {"):])
        mode = m.group(1) if m else "the default"
        bwrap = shutil.which("bwrap")
        how = "no bwrap on PATH"
        if bwrap:
            ver = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
            how = ver or bwrap
        return f"sandbox: default ({mode}), {how}"

    def argv(self, prompt: str | None, *, session_dir: str | None = None, interactive: bool = False,
             rpc: bool = False) -> list[str]:
        args = [self.executable, "--model", f"{MODEL_PROVIDER}/{MODEL_ID}"]
        args += ["--session-dir", session_dir] if session_dir else ["--no-session"]
        return args + self._mode_args(prompt, interactive, rpc)

    def session_holder(self, root: int) -> int | None:
        """The coordinator actor (``python -m pi_actors.runtime.child coordinator``), a child
        of the CLI. Should there be two (a standby started next to the one in service), the
        older one: a replacement is only ever started after the one it replaces (a dead
        coordinator leaves the tree, and the run's check sees the pid change)."""
        from .procs import proc_cmdline, tree_pids

        found = [pid for pid in tree_pids(root) if proc_cmdline(pid).endswith("pi_actors.runtime.child coordinator")]
        return min(found, key=_start_ticks) if found else None

    def env(self) -> dict[str, str]:
        env = _base_env()
        env["PI_ACTORS_DIR"] = str(self.home)
        return env


class Pi(_CLI):
    name = "pi"
    short = "pi"
    # The footer with the model id is drawn together with the editor.
    ready_marker = MODEL_ID.encode()

    def __init__(self, home: Path, port: int, executable: str) -> None:
        super().__init__(home, port)
        self.executable = executable

    def version(self) -> str:
        done = subprocess.run([self.executable, "--version"], capture_output=True, text=True, timeout=60, env=self.env())
        return (done.stdout or done.stderr).strip()

    def argv(self, prompt: str | None, *, session_dir: str | None = None, interactive: bool = False,
             rpc: bool = False) -> list[str]:
        args = [self.executable, "--provider", MODEL_PROVIDER, "--model", MODEL_ID]
        args += ["--session-dir", session_dir] if session_dir else ["--no-session"]
        return args + self._mode_args(prompt, interactive, rpc)

    def session_holder(self, root: int) -> int | None:
        """pi is one node process (``bin/pi`` runs node through its shebang): the root itself."""
        return root if os.path.exists(f"/proc/{root}") else None

    def env(self) -> dict[str, str]:
        env = _base_env()
        env.update(PI_CODING_AGENT_DIR=str(self.home), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0")
        return env


def _start_ticks(pid: int) -> int:
    """When a process started (clock ticks after boot; field 22 of ``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return 0
    return int(raw[raw.rfind(b")") + 2 :].split()[19])


def pi_cache_dir() -> Path:
    return Path(os.environ.get("PI_BENCH_CACHE") or "~/.cache/pi-actors-bench/pi").expanduser()


def find_pi() -> tuple[str | None, str]:
    """``(path to pi, how it was found)``, or ``(None, why not)``."""
    peer = os.environ.get("PI_PEER_CLI")
    if peer:
        path = shutil.which(peer) or (peer if os.access(peer, os.X_OK) else None)
        if path is None:
            return None, f"PI_PEER_CLI={peer!r} is not an executable"
        return path, f"PI_PEER_CLI={peer}"
    cached = pi_cache_dir() / "node_modules" / ".bin" / "pi"
    if os.access(cached, os.X_OK):
        if shutil.which("node") is None:
            return None, f"{cached} exists but node is not on PATH"
        return str(cached), f"cache folder {pi_cache_dir()}"
    return None, (
        f"no pi CLI: set PI_PEER_CLI to a pi binary, or run with --install-pi"
        f" (npm install {PI_PACKAGE} into {pi_cache_dir()})"
    )


def install_pi() -> str:
    """``npm install`` pi into the cache folder; returns a one-line outcome."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH: cannot install pi"
    cache = pi_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    if not (cache / "package.json").exists():
        (cache / "package.json").write_text('{"name": "pi-actors-bench-peer", "private": true}\n')
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", PI_PACKAGE], cwd=cache, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        return f"npm install {PI_PACKAGE} failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    return f"installed {PI_PACKAGE} into {cache}"
