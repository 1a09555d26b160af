"""Run ``python -m pi_actors.runtime.child`` on an entry module written for the test.

The child gets one link, ``peer`` (a socketpair), and its boot document on stdin, as the
runtime starts an actor; the helper returns the finished process and every byte the entry
wrote to ``peer``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def run_actor_child(tmp_path: Path, module: str, source: str, func: str,
                    extra_argv: tuple[str, ...] = (), extra_env: dict[str, str] | None = None,
                    ) -> tuple[subprocess.CompletedProcess, bytes]:
    """Write ``source`` as ``module``.py into ``tmp_path`` and run the actor ``module:func``
    (``extra_argv`` after its name, e.g. ``--preload``; ``extra_env`` added to its
    environment) to its end."""
    (tmp_path / f"{module}.py").write_text(source)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    boot = {"name": "t", "entry": f"{module}:{func}", "links": {"peer": theirs.fileno()},
            "config": {}, "parent_pid": os.getpid(), "death_signal": 9}
    inherited = {k: v for k, v in os.environ.items() if k != "PI_ACTORS_PROFILE_DIR"}  # only when asked for
    env = {**inherited, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), **(extra_env or {})}
    with ours:
        try:
            done = subprocess.run([sys.executable, "-m", "pi_actors.runtime.child", "t", *extra_argv],
                                  input=json.dumps(boot).encode(), capture_output=True,
                                  pass_fds=(theirs.fileno(),), env=env, timeout=60)
        finally:
            theirs.close()
        ours.settimeout(60)
        received = b""
        while chunk := ours.recv(65536):
            received += chunk
    return done, received
