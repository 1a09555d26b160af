"""The bash tool with real processes (pi spec §1.7) and the tail-truncation helper (§1.3).

A test learns that a command's processes have started from an event (the command announces
itself on its output, writes ``$!`` to a file, or opens a fifo the test waits on), snapshots
their pids then by process group (each call runs in its own group, and the group, unlike the
command line or environment, stays readable while a process execs), and waits for their exit
through pidfds (``_procs.wait_exited``); ``trio.fail_after`` is only a safety bound. Every
process a test starts also carries a unique marker in its environment (and ``sleep <marker>``
as its command), so a test can check that nothing of it is left, in or out of the group.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap

import pytest
import trio
from _procs import environ_has, live_pids, wait_exited

from pi_actors.coding.tools import ToolError, kill_all_process_groups, run_tool, truncate_tail
from pi_actors.coding.tools import bash as bash_module
from pi_actors.coding.tools.process import live_process_groups

MARKER_VAR = "PI_ACTORS_TEST_BASH_MARKER"


def new_marker() -> str:
    return f"1000.{secrets.randbelow(10**6):06d}"


@pytest.fixture
def marker(monkeypatch) -> str:
    """A unique value, exported so that every process the test starts carries it."""
    value = new_marker()
    monkeypatch.setenv(MARKER_VAR, value)
    return value


def group_members(groups) -> list[int]:
    """Pids of running (non-zombie) processes in the process groups ``groups``."""

    def member(pid: int) -> bool:
        try:
            return os.getpgid(pid) in groups
        except OSError:
            return False

    return live_pids(member)


def marked(marker: str) -> list[int]:
    """Pids of running (non-zombie) processes carrying ``marker`` in their environment."""
    return live_pids(lambda pid: environ_has(pid, f"{MARKER_VAR}={marker}"))


async def open_fifo_for_writing(path) -> int:
    """Wait until the command opens the fifo ``path`` for reading; return our write end."""
    return await trio.to_thread.run_sync(os.open, str(path), os.O_WRONLY, abandon_on_cancel=True)


async def bash(command: str, cwd="/tmp", on_update=None, **extra):
    return await run_tool("bash", {"command": command, **extra}, cwd=str(cwd), on_update=on_update)


def text_of(result) -> str:
    (block,) = result["content"]
    return block["text"]


async def test_stdout_and_stderr_come_back_merged_in_order():
    result = await bash("echo out; echo err >&2; echo out2")
    assert text_of(result) == "out\nerr\nout2\n"
    assert result["details"] is None


async def test_command_without_output_says_no_output():
    assert text_of(await bash("true")) == "(no output)"


async def test_command_runs_in_the_given_directory(tmp_path):
    assert text_of(await bash("pwd", cwd=tmp_path)) == f"{tmp_path}\n"


async def test_nonzero_exit_is_an_error_carrying_output_and_code():
    with pytest.raises(ToolError) as info:
        await bash("echo out; exit 3")
    assert info.value.message == "out\n\n\nCommand exited with code 3"
    with pytest.raises(ToolError) as info:
        await bash("exit 1")
    assert info.value.message == "(no output)\n\nCommand exited with code 1"


async def test_missing_working_directory_is_reported(tmp_path):
    missing = tmp_path / "gone"
    with pytest.raises(ToolError) as info:
        await bash("echo hi", cwd=missing)
    assert info.value.message == f"Working directory does not exist: {missing}\nCannot execute bash commands."


async def test_streaming_updates_arrive_before_the_result_and_accumulate(tmp_path):
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    updates: list[dict] = []
    first_seen = trio.Event()

    async def on_update(partial):
        updates.append(partial)
        if "first" in partial["content"][0]["text"]:
            first_seen.set()

    def release():
        with open(fifo, "w") as f:
            f.write("go\n")

    result = None
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def run():
                nonlocal result
                result = await bash(f"echo first; read line < {fifo}; echo second", on_update=on_update)

            nursery.start_soon(run)
            await first_seen.wait()
            # The command is blocked on the fifo, so it cannot have produced its result yet.
            assert result is None
            assert updates[-1] == {"content": [{"type": "text", "text": "first\n"}], "details": {}}
            await trio.to_thread.run_sync(release)

    assert text_of(result) == "first\nsecond\n"
    # Each update carries everything so far, not a delta.
    assert updates[-1]["content"][0]["text"] == "first\nsecond\n"


async def test_long_output_keeps_the_last_2000_lines_and_saves_everything():
    updates = []

    async def on_update(partial):
        updates.append(partial)

    result = await bash("seq 1 3000", on_update=on_update)
    text = text_of(result)
    path = result["details"]["fullOutputPath"]
    # seq ends with a newline, so the last (empty) line counts: 3001 lines.
    assert text.startswith("1002\n")
    assert text.endswith(f"3000\n\n\n[Showing lines 1002-3001 of 3001. Full output: {path}]")
    assert os.path.basename(path).startswith("pi-bash-") and path.endswith(".log")
    assert len(os.path.basename(path)) == len("pi-bash-") + 16 + len(".log")
    with open(path) as f:
        assert f.read() == "".join(f"{i}\n" for i in range(1, 3001))
    truncation = result["details"]["truncation"]
    assert truncation["truncatedBy"] == "lines" and truncation["outputLines"] == 2000
    assert updates[-1]["details"]["fullOutputPath"] == path
    os.unlink(path)


async def test_output_over_50kb_is_cut_by_bytes_and_the_file_has_every_byte():
    result = await bash("seq -f '%0200g' 1 1000")
    text = text_of(result)
    path = result["details"]["fullOutputPath"]
    expected = "".join(f"{i:0200d}\n" for i in range(1, 1001))
    with open(path) as f:
        assert f.read() == expected
    assert text.endswith(f"(50.0KB limit). Full output: {path}]")
    assert f"{1000:0200d}\n\n\n[Showing lines " in text
    kept = text.split("\n\n[Showing")[0]
    assert len(kept.encode()) <= 50 * 1024 and expected.endswith(kept)
    assert result["details"]["truncation"]["truncatedBy"] == "bytes"
    os.unlink(path)


async def test_one_huge_final_line_shows_its_last_50kb():
    result = await bash("head -c 70000 /dev/zero | tr '\\0' a")
    text = text_of(result)
    path = result["details"]["fullOutputPath"]
    assert text == "a" * 51200 + f"\n\n[Showing last 50.0KB of line 1 (line is 68.4KB). Full output: {path}]"
    assert result["details"]["truncation"]["lastLinePartial"] is True
    os.unlink(path)


async def test_timeout_kills_the_command_and_says_so(marker):
    started: list[int] = []

    async def on_update(partial):
        # "before" is echoed after the background sleep was forked: shell and sleep both run.
        if not started:
            started.extend(group_members(live_process_groups()))

    with pytest.raises(ToolError) as info:
        await bash(f"sleep {marker} & echo before; sleep {marker}", timeout=0.5, on_update=on_update)
    assert info.value.message == "before\n\n\nCommand timed out after 0.5 seconds"
    assert len(started) >= 2
    # Also whatever started after the snapshot (the foreground sleep) and may still be dying.
    await wait_exited(started + marked(marker))
    assert not marked(marker)
    assert not live_process_groups()


async def test_timeout_uses_sigkill_when_sigterm_is_ignored(monkeypatch, marker, tmp_path):
    monkeypatch.setattr(bash_module, "_TERM_GRACE", 0.2)
    pidfile = tmp_path / "pid"
    with pytest.raises(ToolError) as info:
        await bash(f"trap '' TERM; sleep {marker} & echo $! > {pidfile}; wait", timeout=0.3)
    assert info.value.message == "Command timed out after 0.3 seconds"
    # The sleep ignores SIGTERM (inherited from the trap): only SIGKILL ends it.
    sleeper = int(pidfile.read_text())
    await wait_exited([sleeper, *marked(marker)])
    assert not marked(marker)


async def test_cancelling_the_call_kills_the_whole_process_group(marker):
    seen: list[BaseException] = []
    started = trio.Event()

    async def on_update(partial):
        if "started" in partial["content"][0]["text"]:
            started.set()

    async def call():
        try:
            await bash(f"sleep {marker} & sleep {marker} & echo started; wait; echo never", on_update=on_update)
        except BaseException as exc:
            seen.append(exc)
            raise

    with trio.fail_after(10):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await started.wait()
                # The shell and its two background sleeps.
                pids = group_members(live_process_groups())
                assert len(pids) == 3
                scope.cancel()
    assert scope.cancelled_caught
    # The caller sees trio's own Cancelled, not a tool result or an exception group.
    assert len(seen) == 1 and isinstance(seen[0], trio.Cancelled)
    await wait_exited(pids)
    assert not marked(marker)
    assert not live_process_groups()


async def test_a_failing_update_callback_stops_the_command_and_raises_as_is(marker):
    started: list[int] = []

    async def broken_link(partial):
        # "hi" is echoed after the background sleep was forked: shell and sleep both run.
        started.extend(group_members(live_process_groups()))
        raise ConnectionError("pool link lost")

    with trio.fail_after(10):
        with pytest.raises(ConnectionError, match="pool link lost"):
            await bash(f"sleep {marker} & echo hi; sleep {marker}", on_update=broken_link)
    assert len(started) >= 2
    await wait_exited(started + marked(marker))
    assert not marked(marker)


async def test_background_children_die_when_the_command_exits(marker, tmp_path):
    pidfile = tmp_path / "pid"
    with trio.fail_after(10):
        result = await bash(f"sleep {marker} & echo $! > {pidfile}; echo done")
    assert text_of(result) == "done\n"
    sleeper = int(pidfile.read_text())
    await wait_exited([sleeper, *marked(marker)])
    assert not marked(marker)


async def test_kill_all_process_groups_ends_running_commands(marker, tmp_path):
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    result = None
    writer = None
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def run():
                    nonlocal result
                    result = await bash(f"sleep {marker} & read line < {fifo}; echo unreachable")

                nursery.start_soon(run)
                # The shell opened the fifo, so the sleep runs; it stays blocked reading the
                # fifo while we hold the write end open.
                writer = await open_fifo_for_writing(fifo)
                pids = group_members(live_process_groups())
                assert len(pids) == 2
                kill_all_process_groups()
    finally:
        if writer is not None:
            os.close(writer)
    # pi treats a shell killed by a signal as a success, with whatever output there was.
    assert text_of(result) == "(no output)"
    await wait_exited(pids)
    assert not marked(marker)


async def test_command_dies_with_its_worker_process(marker):
    worker_code = textwrap.dedent(
        f"""
        import functools, trio
        from pi_actors.coding.tools import run_tool
        from pi_actors.coding.tools.process import live_process_groups

        async def on_update(partial):
            print("started", *live_process_groups(), flush=True)

        call = functools.partial(run_tool, cwd="/tmp", on_update=on_update)
        trio.run(call, "bash", {{"command": "echo x; exec sleep {marker}"}})
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    worker = await trio.lowlevel.open_process(
        [sys.executable, "-c", worker_code], stdout=subprocess.PIPE, cwd=root
    )
    try:
        with trio.fail_after(10):
            seen = b""
            while b"\n" not in seen:
                chunk = await worker.stdout.receive_some()
                assert chunk, "worker exited early"
                seen += chunk
        word, *groups = seen.split(b"\n")[0].split()
        assert word == b"started"
        # The command's shell, which becomes the sleep.
        pids = group_members({int(g) for g in groups})
        assert len(pids) == 1
        worker.send_signal(signal.SIGKILL)
        await worker.wait()
        await wait_exited(pids)
        assert not marked(marker)
    finally:
        if worker.returncode is None:
            worker.kill()
        await worker.wait()
        await worker.stdout.aclose()


def test_truncate_tail_keeps_whole_lines_from_the_end():
    result = truncate_tail("one\ntwo\nthree\nfour", max_bytes=10)
    assert result.content == "three\nfour"
    assert result.truncated_by == "bytes" and not result.last_line_partial
    assert (result.total_lines, result.output_lines) == (4, 2)


def test_truncate_tail_line_limit():
    result = truncate_tail("\n".join(str(i) for i in range(10)), max_lines=3)
    assert result.content == "7\n8\n9" and result.truncated_by == "lines"


def test_truncate_tail_partial_last_line_respects_utf8_boundaries():
    result = truncate_tail("x\n" + "é" * 10, max_bytes=5)
    # 5 bytes from the end would start inside a two-byte character; it is skipped.
    assert result.content == "éé"
    assert result.last_line_partial and result.output_lines == 1 and result.output_bytes == 4


def test_truncate_tail_huge_final_line_then_newline_keeps_only_the_empty_line():
    result = truncate_tail("y" * 100 + "\n", max_bytes=50)
    assert result.content == "" and result.truncated and not result.last_line_partial


# -- nothing is cut silently: through the real pool, sandboxed -------------------------------
#
# These run the bash tool as a session does: in a sandboxed worker of the real tool pool,
# whose /tmp is the pool's private directory. The full-output file a notice names is checked
# from inside the same pool (bash hashes it, read reads it), which is what the model can do.


def _pool_modules():
    from support.sandbox import open_pool, sandbox_config
    from support.sandbox import text_of as pool_text

    return open_pool, sandbox_config, pool_text


def _notice(text: str) -> tuple[str, str]:
    """(the text before the notice, the notice) of a bash result with a truncation notice."""
    kept, _, notice = text.rpartition("\n\n[")
    return kept, "[" + notice


async def _digest_in_pool(pool, path: str) -> tuple[int, str]:
    """(size, sha256) of ``path`` as a tool in the pool sees it."""
    result = await pool.bash(f"wc -c < {path}; sha256sum < {path}")
    size, digest = result["content"][0]["text"].split()[:2]
    return int(size), digest


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


async def test_a_single_120000_byte_line_is_shown_by_its_last_50kb_with_its_real_size(tmp_path):
    open_pool, sandbox_config, pool_text = _pool_modules()
    expected = "".join(str(i) for i in range(1, 30001)).encode()[:120000]
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash("seq 1 30000 | tr -d '\\n' | head -c 120000")
        assert result["isError"] is False
        kept, notice = _notice(pool_text(result))
        path = result["details"]["fullOutputPath"]
        assert notice == f"[Showing last 50.0KB of line 1 (line is 117.2KB). Full output: {path}]"
        assert kept.encode() == expected[-51200:]
        truncation = result["details"]["truncation"]
        assert truncation["totalBytes"] == 120000 and truncation["lastLinePartial"] is True
        assert path.startswith("/tmp/pi-bash-")
        assert await _digest_in_pool(pool, path) == (120000, _sha256(expected))


async def test_a_47_7_mb_line_is_reported_as_47_7_mb_and_saved_whole(tmp_path):
    open_pool, sandbox_config, pool_text = _pool_modules()
    size = 50_000_000
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash(f"head -c {size} /dev/zero | tr '\\0' a")
        kept, notice = _notice(pool_text(result))
        path = result["details"]["fullOutputPath"]
        assert notice == f"[Showing last 50.0KB of line 1 (line is 47.7MB). Full output: {path}]"
        assert kept == "a" * 51200
        assert result["details"]["truncation"]["totalBytes"] == size
        assert await _digest_in_pool(pool, path) == (size, _sha256(b"a" * size))


async def test_millions_of_lines_are_counted_whole_in_the_notice(tmp_path):
    open_pool, sandbox_config, pool_text = _pool_modules()
    size = 10_000_000  # 1,000,000 lines of "abcdefghi\n"
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash(f"yes abcdefghi | head -c {size}")
        kept, notice = _notice(pool_text(result))
        path = result["details"]["fullOutputPath"]
        # The trailing newline makes a last, empty line: 1,000,001 lines; 2000 are shown.
        assert notice == f"[Showing lines 998002-1000001 of 1000001. Full output: {path}]"
        assert kept == "abcdefghi\n" * 1999
        truncation = result["details"]["truncation"]
        assert (truncation["totalLines"], truncation["totalBytes"]) == (1000001, size)
        assert await _digest_in_pool(pool, path) == (size, _sha256(b"abcdefghi\n" * 1_000_000))


_SEQ_THEN_WAIT = "seq 1 100000; echo started; sleep {n}"
_SEQ_OUTPUT = "".join(f"{i}\n" for i in range(1, 100001)) + "started\n"


async def _check_kept_output(pool, text: str, status: str) -> None:
    """``text`` = the last 2000 lines of _SEQ_OUTPUT, the notice, then ``status``; the file
    the notice names holds all of it, and the read tool can read it."""
    body, _, tail = text.rpartition("\n\n")
    assert tail == status
    kept, notice = _notice(body)
    path = notice.rsplit("Full output: ", 1)[1].rstrip("]")
    assert notice == f"[Showing lines 98003-100002 of 100002. Full output: {path}]"
    assert kept == "".join(f"{i}\n" for i in range(98003, 100001)) + "started\n"
    assert await _digest_in_pool(pool, path) == (len(_SEQ_OUTPUT), _sha256(_SEQ_OUTPUT.encode()))
    read = await pool.run("read", {"path": path, "offset": 99999})
    assert read["isError"] is False and read["content"][0]["text"] == "99999\n100000\nstarted\n"


async def test_an_aborted_command_keeps_its_output_before_the_abort_notice(tmp_path):
    open_pool, sandbox_config, pool_text = _pool_modules()
    n = 700000 + secrets.randbelow(100000)
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        args = {"toolCallId": "c", "name": "bash", "args": {"command": _SEQ_THEN_WAIT.format(n=n)}, "cwd": str(tmp_path)}
        async with pool.peer.open_call("run_tool", args) as call:
            async for partial in call:
                if pool_text(partial).endswith("started\n"):
                    break
            await call.cancel()
            result = await call.result()
        assert result["isError"] is True
        await _check_kept_output(pool, pool_text(result), "Command aborted")


async def test_a_timed_out_command_keeps_its_output_before_the_timeout_notice(tmp_path):
    open_pool, sandbox_config, pool_text = _pool_modules()
    n = 800000 + secrets.randbelow(100000)
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash(_SEQ_THEN_WAIT.format(n=n), timeout=1)
        assert result["isError"] is True
        await _check_kept_output(pool, pool_text(result), "Command timed out after 1 seconds")


async def test_a_command_aborted_before_it_starts_says_only_command_aborted(marker):
    abort = trio.Event()
    abort.set()
    with pytest.raises(ToolError) as info:
        await run_tool("bash", {"command": f"sleep {marker}"}, cwd="/tmp", abort=abort)
    assert info.value.message == "Command aborted"
    assert marked(marker) == []


async def test_output_that_cannot_be_saved_says_so_instead_of_naming_a_file(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    result = await bash("seq 1 3000")
    text = text_of(result)
    assert text.startswith("1002\n")
    notice = text.rsplit("\n\n", 1)[1]
    assert notice.startswith(f"[Showing lines 1002-3001 of 3001. Full output not saved: cannot write {tmp_path / 'missing'}/pi-bash-")
    assert notice.endswith(".log: No such file or directory]")
    assert "fullOutputPath" not in result["details"]
    assert result["details"]["truncation"]["totalLines"] == 3001


from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st


@hsettings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(["a", "b", "\n", "é", "€", "😀"]), max_size=200),
    cuts=st.lists(st.integers(min_value=1, max_value=30), max_size=40),
)
def test_output_cut_into_any_chunks_is_truncated_as_the_whole_output_would_be(text, cuts):
    """The rolling buffer forgets old chunks, yet the result is what truncate_tail gives for
    the whole output, with the whole output's totals (tiny limits, so everything is
    exercised on short inputs)."""
    data = text.encode()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bash_module, "DEFAULT_MAX_BYTES", 20)
        patch.setattr(bash_module, "DEFAULT_MAX_LINES", 5)
        patch.setattr(bash_module, "_ROLLING_MAX_BYTES", 40)
        patch.setattr(bash_module._Output, "_open_spill", lambda self: None)
        output = bash_module._Output()
        pos = 0
        for cut in [*cuts, len(data)]:
            if data[pos : pos + cut]:
                output.add(data[pos : pos + cut])
            pos += cut
            assert output._buffered >= min(output.total_bytes, 40)
        got = bash_module._truncation(output)
    want = truncate_tail(text, max_lines=5, max_bytes=20)
    assert (got.content, got.truncated, got.truncated_by, got.output_lines, got.last_line_partial) == (
        want.content, want.truncated, want.truncated_by, want.output_lines, want.last_line_partial)
    assert (got.total_bytes, got.total_lines) == (len(data), text.count("\n") + 1)
    assert output.last_line_bytes == len(text.rsplit("\n", 1)[-1].encode())
