"""``python -m pi_actors.runtime.child``: how an actor process ends.

After the entry function returns, the process ends without the interpreter's teardown
(``os._exit``), but only after its ``atexit`` handlers have run and stdout/stderr have been
flushed; an entry that raises still exits the usual way (traceback, status 1).
"""

from __future__ import annotations

import subprocess
import textwrap

from support.actor_child import run_actor_child

ENTRY = textwrap.dedent('''
    import atexit, sys

    async def ends_well(links, config):
        atexit.register(lambda: print("atexit ran", flush=False))
        sys.stdout.write("buffered output, no newline")
        sys.stderr.write("buffered error")
        await links["peer"].send_all(b"last frame")

    async def fails(links, config):
        raise RuntimeError("the entry broke")
''')


def _run_child(tmp_path, func: str) -> tuple[subprocess.CompletedProcess, bytes]:
    return run_actor_child(tmp_path, "child_exit_entry", ENTRY, func)


def test_a_finished_actor_runs_its_atexit_handlers_and_flushes_its_output(tmp_path):
    done, received = _run_child(tmp_path, "ends_well")
    assert done.returncode == 0, done.stderr.decode()
    assert received == b"last frame"
    assert done.stdout == b"buffered output, no newlineatexit ran\n"
    assert done.stderr == b"buffered error"


def test_an_entry_that_raises_exits_with_its_traceback_and_status_1(tmp_path):
    done, _ = _run_child(tmp_path, "fails")
    assert done.returncode == 1
    assert b"RuntimeError: the entry broke" in done.stderr
