"""An actor process starts up without the cyclic garbage collector (``pi_actors._startup_gc``).

Its imports run with the collector off; once start-up is over (the entry imported, a
prestarted actor's preload thread done) what start-up allocated is frozen and the collector
is on for the rest of the process's life. Any other process that imports the runtime keeps
its collector as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from support.actor_child import run_actor_child

ENTRY = textwrap.dedent('''
    import gc, json, threading

    AT_IMPORT = gc.isenabled()  # while the actor's own modules are imported
    PRELOAD = {}

    def prepare():
        PRELOAD["enabled"] = gc.isenabled()

    async def report(links, config):
        for thread in threading.enumerate():
            if thread.name == "preload":
                thread.join()  # the preload's own work is over: start-up is
        state = {"at_import": AT_IMPORT, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                 "preload": PRELOAD.get("enabled")}
        await links["peer"].send_all(json.dumps(state).encode())
''')


def _child_state(tmp_path, *, preload: bool = False) -> dict:
    """Start an actor process on ENTRY's ``report`` and return what it saw."""
    extra = ("--preload", "gc_state_entry:prepare", "--parent", str(os.getpid())) if preload else ()
    done, received = run_actor_child(tmp_path, "gc_state_entry", ENTRY, "report", extra)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(received)


def test_an_actor_imports_without_the_collector_and_runs_with_it_on_and_its_start_up_frozen(tmp_path):
    state = _child_state(tmp_path)
    assert state["at_import"] is False
    assert state["enabled"] is True
    # trio, msgspec and the runtime alone are tens of thousands of objects.
    assert state["frozen"] > 10_000


def test_a_prestarted_actor_keeps_the_collector_off_until_its_preload_is_done(tmp_path):
    state = _child_state(tmp_path, preload=True)
    assert state["preload"] is False  # the preload ran with the collector off
    assert state["enabled"] is True and state["frozen"] > 10_000


def test_a_process_that_only_imports_the_runtime_keeps_its_collector():
    code = "import gc, pi_actors.runtime, pi_actors.runtime.child; print(gc.isenabled(), gc.get_freeze_count())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["True", "0"]


def _command_gc_at_exit(*args: str) -> list[str]:
    """Run the ``pi-actors`` console entry (``main()`` as the command, not called from
    Python) with ``args``; the collector's state and whether anything was frozen, as seen by
    an ``atexit`` handler (the last thing the command runs)."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('GC', gc.isenabled(), gc.get_freeze_count() > 0, flush=True))\n"
            f"sys.argv = ['pi-actors', *{list(args)!r}]\n"
            "from pi_actors.cli.main import main\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return [line for line in done.stdout.splitlines() if line.startswith("GC ")]


def test_the_command_turns_the_collector_back_on_however_its_start_up_ends():
    assert _command_gc_at_exit("--help") == ["GC True True"]  # argparse's exit
    assert _command_gc_at_exit("-p") == ["GC True True"]  # a user mistake: no prompt
    assert _command_gc_at_exit("serve", "--help") == ["GC True True"]  # a subcommand


def test_the_cli_called_from_python_leaves_the_collector_alone():
    import gc

    from pi_actors.cli.main import main

    frozen = gc.get_freeze_count()
    try:
        main(["--help"])
    except SystemExit:
        pass
    assert gc.isenabled() and gc.get_freeze_count() == frozen
