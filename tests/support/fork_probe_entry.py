"""The entry of the actor ``fork_probe.py`` forks: reports what it sees of itself."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from typing import Any


def _tried(module: str) -> str:
    try:
        importlib.import_module(module)
    except ImportError:
        return "not found"
    return "imported"


async def report(links: dict[str, Any], config: Any) -> None:
    for thread in threading.enumerate():
        if thread.name == "preload":  # imports while the actor waited for its boot; done by now
            thread.join()
    with open("/proc/self/cmdline", "rb") as f:
        cmdline = [part.decode() for part in f.read().split(b"\0") if part]
    with open("/proc/self/environ", "rb") as f:
        environ = [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    doc = {
        "cmdline": cmdline,
        "environ": environ,
        "os_environ": sorted(os.environ),
        "cwd": os.getcwd(),
        "fds": fds,
        "preloaded": "pi_actors.actors.tool_pool" in sys.modules,
        "imports": {name: _tried(name) for name in ("planted_in_cwd", "planted_in_pythonpath", "planted_by_script")},
    }
    await links["report"].send_all(json.dumps(doc).encode())
    await links["report"].aclose()
