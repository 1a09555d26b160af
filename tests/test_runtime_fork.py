"""``runtime.fork_actor``: an actor forked from a program that has imported the runtime is
made into what a started one is before it runs anything — the environment it is given (a
credential scrubbed from it is gone from ``/proc/PID/environ`` too), the command line of an
actor (the parent's arguments overwritten), none of the parent's descriptors, an import path
without the working directory, ``PYTHONPATH`` or the script's directory — and it is never
left running: given up, it is reaped; orphaned before its boot, it dies with its parent.

Real processes: a plain program (``support/fork_probe.py``) forks the actor and boots it;
the actor reports what it sees of itself over its link."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import wait_exited

SUPPORT = Path(__file__).parent / "support"
SECRET = "fork-probe-secret-value-1234"


def _probe(tmp_path: Path, mode: str) -> list[dict]:
    """Run the probe program, copied into a directory of its own with a module planted beside
    it, from a working directory and with a PYTHONPATH that each hold one too."""
    script_dir, cwd, extra = tmp_path / "script", tmp_path / "work", tmp_path / "pythonpath"
    for d, name in ((script_dir, "planted_by_script"), (cwd, "planted_in_cwd"), (extra, "planted_in_pythonpath")):
        d.mkdir()
        (d / f"{name}.py").write_text("raise SystemExit('imported a planted module')\n")
    shutil.copy(SUPPORT / "fork_probe.py", script_dir / "fork_probe.py")
    env = {**os.environ, "PROBE_SECRET": SECRET, "PYTHONPATH": str(extra), "PROBE_KEPT": "kept-value"}
    done = subprocess.run(
        [sys.executable, str(script_dir / "fork_probe.py"), mode, str(SUPPORT), "--api-key", SECRET],
        cwd=cwd, env=env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


def test_a_forked_actor_shows_an_actors_command_line_and_only_the_environment_it_was_given(tmp_path):
    started, report, ended = _probe(tmp_path, "report")
    assert report["cmdline"][-4:] == ["-I", "-m", "pi_actors.runtime.child", "probe"]
    assert SECRET not in " ".join(report["cmdline"])  # the parent's arguments are gone
    assert "PROBE_KEPT=kept-value" in report["environ"]
    assert not [entry for entry in report["environ"] if SECRET in entry]
    assert "PROBE_SECRET" not in report["os_environ"] and "PROBE_KEPT" in report["os_environ"]
    assert report["cwd"] == "/"
    assert report["preloaded"]
    assert ended == {"exit": 0}


def test_a_forked_actor_keeps_none_of_its_parents_descriptors(tmp_path):
    started, report, _ended = _probe(tmp_path, "report")
    assert started["held"] not in report["fds"].values()
    # Its standard streams, its link, and what its own event loop opened since (no file).
    assert not [target for target in report["fds"].values() if target.startswith("/") and not target.startswith(("/dev/", "/proc/"))], (
        report["fds"]
    )


def test_a_forked_actor_never_imports_from_the_working_directory_pythonpath_or_the_scripts_directory(tmp_path):
    _started, report, _ended = _probe(tmp_path, "report")
    assert report["imports"] == {"planted_in_cwd": "not found", "planted_in_pythonpath": "not found", "planted_by_script": "not found"}


def test_a_forked_actor_given_up_before_its_boot_is_killed_and_reaped(tmp_path):
    started, given_up = _probe(tmp_path, "abandon")
    assert given_up["returncode"] is not None
    assert not os.path.exists(f"/proc/{started['pid']}")


async def test_a_forked_actor_whose_parent_dies_before_booting_it_ends_too(tmp_path):
    (started,) = _probe(tmp_path, "orphan")
    await wait_exited([started["pid"]], timeout=10)


def test_fork_actor_refuses_to_fork_a_process_that_runs_trio():
    import trio

    from pi_actors.runtime import fork_actor

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="trio is running"):
            fork_actor(name="never", links=(), env={})

    trio.run(inside)
