"""Starting sandboxed tool workers for parallel calls: which processes it takes.

A burst of parallel calls forks one worker per call, and every process forked then is paid
for by the call's wall time. These tests run a real pool (its zygote in bubblewrap) in a
child process under ``strace -f`` and read the process tree from the trace: what the zygote
and its workers execute, and who forks whom. Skipped where ``strace`` cannot trace.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from support.sandbox import ZYGOTE_MARK

STRACE = shutil.which("strace")
TESTS = Path(__file__).parent
CALLS = 4
# The zygote's own exec (bwrap's command line holds it too, but not as "-m", "MODULE").
ZYGOTE_EXEC = f'"-m", "{ZYGOTE_MARK.split()[0]}"'

# The child: a pool with no warm worker, CALLS parallel bash calls, their texts printed.
SCRIPT = """
import sys, trio
sys.path.insert(0, sys.argv[2])
from support.sandbox import open_pool, sandbox_config, text_of

async def main(ws, count):
    async with open_pool(ws, **sandbox_config(ws)) as pool:
        out = []
        async def one(i):
            out.append(text_of(await pool.bash(f"echo {i}")))
        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one, i)
        print(" ".join(sorted(text.strip() for text in out)))

trio.run(main, sys.argv[1], int(sys.argv[3]))
"""

_LINE = re.compile(r"^(\d+) +(.*)$")
_FORK_START = re.compile(r"^(clone3?|fork|vfork)\(")
_RESUMED = re.compile(r"^<\.\.\. (clone3?|fork|vfork) resumed>")
_RETURNED = re.compile(r"= (\d+)(?: /\* (\d+) in strace's PID NS \*/)?$")
_EXECVE = re.compile(r'^execve\("([^"]+)", \[(.*?)\]')


class Trace:
    """Processes and threads from an ``strace -f --decode-pids=pidns`` log (host pids)."""

    def __init__(self, text: str) -> None:
        self.children: dict[int, list[int]] = defaultdict(list)  # processes forked
        self.threads: dict[int, list[int]] = defaultdict(list)
        self.execs: dict[int, list[tuple[str, str]]] = defaultdict(list)  # (path, argv)
        pending: dict[int, str] = {}
        for raw in text.splitlines():
            match = _LINE.match(raw)
            if not match:
                continue
            pid, call = int(match.group(1)), match.group(2)
            if _FORK_START.match(call):
                if call.endswith("<unfinished ...>"):
                    pending[pid] = call
                    continue
                self._forked(pid, call, call)
            elif _RESUMED.match(call):
                self._forked(pid, pending.pop(pid, ""), call)
            else:
                execve = _EXECVE.match(call)
                if execve and not call.endswith("= -1 ENOENT (No such file or directory)"):
                    self.execs[pid].append((execve.group(1), execve.group(2)))

    def _forked(self, pid: int, start: str, end: str) -> None:
        returned = _RETURNED.search(end)
        if returned is None:
            return  # failed
        child = int(returned.group(2) or returned.group(1))
        (self.threads if "CLONE_THREAD" in start else self.children)[pid].append(child)

    def started(self, fragment: str) -> list[int]:
        """Pids that executed a command line containing ``fragment`` (bwrap's, which holds
        the command it starts, left out)."""
        return [pid for pid, execs in self.execs.items() if any(fragment in argv and not path.endswith("bwrap") for path, argv in execs)]

    def tree(self, root: int) -> set[int]:
        """``root`` and every process and thread descending from it."""
        seen, todo = set(), [root]
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.add(pid)
                todo += self.children.get(pid, []) + self.threads.get(pid, [])
        return seen


def traced_burst(workspace: Path, log: Path) -> Trace:
    argv = [STRACE, "-f", "-qq", "--decode-pids=pidns", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", str(log)]
    done = subprocess.run(
        [*argv, sys.executable, "-c", SCRIPT, str(workspace), str(TESTS), str(CALLS)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0 and not log.exists():
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(i) for i in range(CALLS)], done.stdout
    return Trace(log.read_text())


@pytest.fixture
def burst(tmp_path) -> Trace:
    if STRACE is None:
        pytest.skip("no strace")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return traced_burst(workspace, tmp_path / "strace.log")


def test_parallel_calls_start_their_workers_without_running_ldconfig(burst):
    (zygote,) = burst.started(ZYGOTE_EXEC)
    ran = [path for pid in burst.tree(zygote) for path, _ in burst.execs.get(pid, []) if path.endswith("ldconfig")]
    assert ran == [], f"the zygote's tree ran {ran}"


def test_each_parallel_call_gets_a_worker_forked_by_the_zygote_itself(burst):
    (zygote,) = burst.started(ZYGOTE_EXEC)
    # The zygote's own warm-up call (a shell it runs before it forks any worker) execs;
    # a worker never does.
    forked = [pid for pid in burst.children[zygote] if not burst.execs.get(pid)]
    # One fork per call, and each of those processes is the worker that runs a call's shell:
    # no intermediate process between the zygote and a worker.
    assert len(forked) == CALLS, forked
    for worker in forked:
        shells = [child for child in burst.children.get(worker, []) if any(path.endswith("sh") for path, _ in burst.execs.get(child, []))]
        assert len(shells) == 1, (worker, burst.children.get(worker), {c: burst.execs.get(c) for c in burst.children.get(worker, [])})
