"""Issue 12, local sandbox: each way out that was found is tried against the real thing.

The pool tests run the real tool pool (``open_pool``) with real bubblewrap workers; the
import test runs the real ``pi-actors`` CLI against the scripted model. Every test performs
the attack and checks that it fails with a clear error while normal tools keep working.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
import trio
from _procs import wait_exited
from support.sandbox import open_pool, sandbox_config, text_of, worker_pids, zygote_pids

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

SECRET = "containment-secret-" + uuid.uuid4().hex
MiB = 1024 * 1024


# -- 1. no process outside the sandbox imports code from the workspace -----------------------

# Generous: every standard module loaded in this test process (which imported the actors,
# trio, the SDKs), the start-up hooks, and the usual suspects by name.
_PLANTED = sorted(
    {name.partition(".")[0] for name in sys.modules if name.partition(".")[0] in sys.stdlib_module_names}
    | {"sitecustomize", "usercustomize", "json", "typing", "struct", "socket", "ssl", "signal", "trio", "msgspec",
       "cbor2", "anthropic", "openai", "httpx", "anyio", "idna", "certifi", "runpy", "importlib"}
)


def _plant(directory: Path, markers: Path) -> None:
    for name in _PLANTED:
        marker = str(markers / name)
        (directory / f"{name}.py").write_text(
            # No imports: it must run even in place of os or io. It leaves a mark outside the
            # workspace (which a sandboxed process could not write) and then breaks nothing.
            f"try:\n    open({marker!r}, 'a').close()\nexcept Exception:\n    pass\n"
        )


async def test_modules_planted_in_the_workspace_are_never_imported_by_the_actors(scripted, env, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    # The first run: a tool plants json.py (a model could); the test plants the rest.
    planted_json = (env.work / "json.py")
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="write", arguments={
        "path": "json.py", "content": f"open({str(markers / 'json-by-tool')!r}, 'a').close()\n"})]))
    scripted.script.append(Reply(text="Planted."))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "plant")
    assert done.returncode == 0, done.stderr.decode()
    assert planted_json.exists()
    _plant(env.work, markers)
    (env.work / "data.txt").write_text("the real content\n")
    # The second run (and every actor, the zygote and the workers start again): tools work.
    for _ in range(2):
        scripted.script.append(Reply(tool_calls=[
            ScriptToolCall(name="read", arguments={"path": "data.txt"}),
            ScriptToolCall(name="bash", arguments={"command": "cat data.txt; echo ok"}),
        ]))
        scripted.script.append(Reply(text="Read it."))
        done = await env.run("--model", "scripted/scripted-model", "--no-session", "--mode", "json", "read")
        assert done.returncode == 0, done.stderr.decode()
        assert sorted(os.listdir(markers)) == []
        results = [line for line in done.stdout.decode().splitlines() if '"tool_execution_end"' in line]
        assert len(results) == 2 and all("the real content" in line and '"isError":false' in line for line in results)
    assert sorted(p.name for p in markers.iterdir()) == []


# -- 2. no ptrace, process_vm_*, pidfd_getfd, /proc/<pid>/mem, keyring, bpf, namespaces --------

_PROBE = textwrap.dedent(
    r"""
    import ctypes, errno, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def report(what, result):
        err = ctypes.get_errno() if result < 0 else 0
        print(what, "ok" if result >= 0 else errno.errorcode.get(err, err))
    zygote = int(sys.argv[1])
    NR = dict(ptrace=101, keyctl=250, add_key=248, process_vm_readv=310, process_vm_writev=311,
              pidfd_open=434, pidfd_getfd=438, bpf=321, unshare=272, perf_event_open=298,
              userfaultfd=323, mount=165, setns=308)
    for target in (1, zygote):
        attached = libc.syscall(NR["ptrace"], 16, target, 0, 0)  # PTRACE_ATTACH
        report(f"ptrace-attach-{'worker' if target == 1 else 'zygote'}", attached)
        if attached == 0:  # (the old code) let it go again: wait for its stop, PTRACE_DETACH
            os.waitpid(target, 0x40000000)
            libc.syscall(NR["ptrace"], 17, target, 0, 0)
    report("keyctl", libc.syscall(NR["keyctl"], 0, -3, 0))  # KEYCTL_GET_KEYRING_ID of the session keyring
    report("add_key", libc.syscall(NR["add_key"], b"user", b"k", b"v", 1, -3))
    buf = ctypes.create_string_buffer(8)
    iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
    report("process_vm_readv", libc.syscall(NR["process_vm_readv"], 1, iov, 1, iov, 1, 0))
    report("process_vm_writev", libc.syscall(NR["process_vm_writev"], 1, iov, 1, iov, 1, 0))
    pidfd = libc.syscall(NR["pidfd_open"], 1, 0)
    report("pidfd_getfd", libc.syscall(NR["pidfd_getfd"], pidfd, 0, 0) if pidfd >= 0 else -1)
    report("bpf", libc.syscall(NR["bpf"], 0, None, 0))
    report("perf_event_open", libc.syscall(NR["perf_event_open"], None, 0, -1, -1, 0))
    report("userfaultfd", libc.syscall(NR["userfaultfd"], 0))
    report("unshare-user", libc.syscall(NR["unshare"], 0x10000000))
    report("unshare-mount", libc.syscall(NR["unshare"], 0x00020000))
    report("mount", libc.syscall(NR["mount"], b"none", b"/tmp", b"tmpfs", 0, None))
    for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/0"):
        try:
            os.close(os.open(path, os.O_RDWR if path.endswith("mem") else os.O_RDONLY))
            print(path, "ok")
        except OSError as exc:
            print(path, errno.errorcode[exc.errno])
    import subprocess
    print("fork-exec", subprocess.run(["true"]).returncode)
    """
)


@pytest.fixture
def ws():
    path = Path(tempfile.mkdtemp(prefix="pi-actors-containment-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe uses x86-64 syscall numbers")
async def test_a_tool_cannot_trace_or_touch_its_worker_the_zygote_or_the_kernel_keyring(ws):
    (ws / "probe.py").write_text(_PROBE)
    with trio.fail_after(120):
        await _probe_attacks(ws)


async def _probe_attacks(ws: Path) -> None:
    async with open_pool(str(ws), **sandbox_config(str(ws))) as pool:
        await pool.assert_healthy()
        (zygote,) = zygote_pids()
        result = await pool.bash(f"{sys.executable} -I probe.py {zygote}")
        lines = dict(line.rsplit(" ", 1) for line in text_of(result).splitlines() if line.strip())
        assert lines.pop("fork-exec") == "0"
        # The zygote is outside the worker's PID namespace (ESRCH); everything else: EPERM,
        # /proc/1 of a non-dumpable worker: EACCES.
        assert lines.pop("ptrace-attach-zygote") in ("EPERM", "ESRCH")
        for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/0"):
            assert lines.pop(path) in ("EACCES", "EPERM"), (path, result)
        assert lines == {name: "EPERM" for name in lines}, result
        assert set(lines) >= {"ptrace-attach-worker", "keyctl", "process_vm_writev", "pidfd_getfd", "bpf", "unshare-user"}
        # Still a healthy worker, and normal tools work.
        assert text_of(await pool.run("read", {"path": "probe.py"})).startswith("\nimport ctypes")
        await pool.assert_healthy()


@pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb for the injection attack")
async def test_a_tool_cannot_inject_code_into_its_worker_to_forge_later_results(ws):
    (ws / "data.txt").write_text("the real content\n")
    # What a hostile command did on the old code: attach to the worker (PID 1 of its
    # namespace) and make it answer every later read with forged content.
    inject = (
        "gdb -p 1 -batch -ex 'call (int)PyGILState_Ensure()' "
        "-ex 'call (int)PyRun_SimpleString(\"import pi_actors.coding.tools as t; "
        "t.run_tool = (lambda *a, **k: (_ for _ in ()).throw(t.ToolError(\\\"FORGED\\\")))\")' "
        "-ex 'call (void)PyGILState_Release($1)' 2>&1 | grep -E 'ptrace|\\$[0-9]'; echo injected"
    )
    async with open_pool(str(ws), **sandbox_config(str(ws), limits={"processes": 4096})) as pool:
        result = await pool.bash(inject, timeout=60)
        assert text_of(result).rstrip().endswith("injected")
        for _ in range(2):
            read = await pool.run("read", {"path": "data.txt"})
            assert read["isError"] is False and text_of(read) == "the real content\n", read
        assert "ptrace: Operation not permitted." in text_of(result), result


# -- 3. resource limits that hold ------------------------------------------------------------


async def test_filling_tmp_or_shm_stops_at_the_size_limit_with_a_clear_error_and_nothing_on_the_host(ws):
    config = sandbox_config(str(ws), limits={"tmpSize": 8 * MiB, "shmSize": 4 * MiB})
    async with open_pool(str(ws), **config) as pool:
        result = await pool.bash(
            f"head -c {32 * MiB} /dev/zero > /tmp/fill; echo tmp $?; head -c {16 * MiB} /dev/zero > /dev/shm/fill; "
            "echo shm $?; df -k /tmp /dev/shm | tail -2"
        )
        text = text_of(result)
        assert text.count("No space left on device") == 2 and "tmp 1" in text and "shm 1" in text, text
        assert "[Sandbox limit: /tmp holds at most 8 MiB (settings.json sandbox.tmpSize) and /dev/shm 4 MiB" in text
        sizes = [line.split()[1] for line in text.splitlines() if line.startswith("tmpfs")]
        assert sizes == ["8192", "4096"], text
        # Nothing of it is on the host: the sandbox's /tmp is not a host directory.
        host = tempfile.gettempdir()
        assert not [name for name in os.listdir(host) if name.startswith(f"pi-actors-tmp-{os.getpid()}-")]
        assert not any(os.path.exists(os.path.join(root, "fill")) for root in (host, "/dev/shm"))
        written = await pool.run("write", {"path": "/tmp/more.txt", "content": "x" * MiB})
        assert written["isError"] is True and text_of(written).startswith("ENOSPC: no space left on device")
        assert "(settings.json sandbox.tmpSize)" in text_of(written)
        # The space is the sandbox's to free again.
        assert text_of(await pool.bash("rm -f /tmp/fill /tmp/more.txt /dev/shm/fill; echo freed")).startswith("freed")
        await pool.assert_healthy()


def _memory_cgroup_available() -> bool:
    """A writable cgroup hierarchy with the memory controller (v2 or v1) is mounted."""
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            mount_point, (fstype, _source, options) = left.split()[4], right.split()[:3]
            if not os.access(mount_point, os.W_OK):
                continue
            if fstype == "cgroup" and "memory" in options.split(","):
                return True
            if fstype == "cgroup2":
                try:
                    with open(os.path.join(mount_point, "cgroup.controllers")) as controllers:
                        if "memory" in controllers.read().split():
                            return True
                except OSError:
                    continue
    return False


@pytest.mark.skipif(not _memory_cgroup_available(), reason="no writable cgroup hierarchy with the memory controller")
async def test_allocating_past_the_memory_limit_gets_a_process_killed_with_a_clear_note_and_nothing_left(ws):
    hog = (
        f"{sys.executable} -I -c 'import time; b = bytearray(48 * 1024 * 1024); time.sleep(60)'"
    )
    config = sandbox_config(str(ws), limits={"memory": 128 * MiB, "tmpSize": 8 * MiB})
    async with open_pool(str(ws), **config) as pool:
        # Each process is under the per-process limit; together they are far over the
        # sandbox's: the kernel kills one, the call says so, and the rest end with the call.
        result = await pool.bash(f"for i in 1 2 3 4 5; do {hog} & done; wait -n; echo one-gone", timeout=60)
        text = text_of(result)
        assert "killed: memory limit 128 MiB reached (settings.json sandbox.memory)" in text, text
        left = await pool.bash("ls /proc | grep -c '^[0-9]'")
        assert int(text_of(left).split()[0]) <= 4  # the worker, this shell, ls, grep
        await pool.assert_healthy()


async def test_the_oom_killer_picks_a_calls_commands_before_its_worker_call_after_call(ws):
    """Commands start with the highest OOM score and the worker is back at 0 once they have
    started (it raises its own score for the fork only), for every call a worker serves."""
    await wait_exited(worker_pids(), timeout=30)  # earlier tests' workers, still exiting
    async with open_pool(str(ws), **{**sandbox_config(str(ws)), "max_workers": 1}) as pool:
        for _ in range(3):
            result = await pool.bash("cat /proc/self/oom_score_adj")
            assert text_of(result) == "1000\n", text_of(result)
            [worker] = worker_pids()
            with open(f"/proc/{worker}/oom_score_adj") as handle:
                assert handle.read().strip() == "0"


@pytest.mark.skipif(not _memory_cgroup_available(), reason="no writable cgroup hierarchy with the memory controller")
async def test_every_call_that_runs_into_the_memory_limit_says_so_and_no_other_call_does(ws):
    """The pool keeps the sandbox's OOM counter open between calls: each call still compares
    fresh counts, so a second kill is reported again and the calls between say nothing."""
    hog = f"{sys.executable} -I -c 'import time; b = bytearray(48 * 1024 * 1024); time.sleep(60)'"
    note = "killed: memory limit 128 MiB reached"
    config = sandbox_config(str(ws), limits={"memory": 128 * MiB, "tmpSize": 8 * MiB})
    async with open_pool(str(ws), **config) as pool:
        for _ in range(2):
            result = await pool.bash(f"for i in 1 2 3 4 5; do {hog} & done; wait -n; echo one-gone", timeout=60)
            assert note in text_of(result), text_of(result)
            calm = await pool.bash("echo calm")
            assert text_of(calm) == "calm\n", text_of(calm)


# -- 4. secrets by allow-list ------------------------------------------------------------------


class Home:
    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.ws = self.home / "project"  # the normal case: the workspace is inside $HOME
        self.agent = base / "agent-dir"  # outside $HOME
        self.log = base / "logs" / "pi.log"
        for d in (self.ws, self.home / ".cache" / "x", self.home / ".config" / "git", self.agent / "sessions", self.log.parent):
            d.mkdir(parents=True)
        self.secrets = {
            self.home / ".bashrc": f"export API_TOKEN={SECRET}\n",
            self.home / ".bash_history": f"curl -H 'Authorization: {SECRET}'\n",
            self.home / ".env": f"KEY={SECRET}\n",
            self.home / ".cache" / "x" / "token": SECRET,
            self.agent / "sessions" / "s.jsonl": SECRET,
            self.agent / "auth.json": SECRET,
            self.log: f"log line {SECRET}\n",
        }
        for path, text in self.secrets.items():
            path.write_text(text)
        (self.home / ".gitconfig").write_text("[user]\n\tname = Tester\n")
        (self.home / ".config" / "git" / "ignore").write_text("*.o\n")

    def config(self, mode: str) -> dict:
        return sandbox_config(str(self.ws), mode=mode, home=str(self.home), hidden=[str(self.agent), str(self.log)])


@pytest.fixture
def home(monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="pi-actors-home-", dir="/var/tmp"))
    monkeypatch.setenv("HOME", str(base / "home"))
    try:
        yield Home(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_home_secrets_the_agent_dir_and_the_log_file_are_unreadable_but_gitconfig_is(home, mode):
    async with open_pool(str(home.ws), **home.config(mode)) as pool:
        for path in home.secrets:
            result = await pool.run("read", {"path": str(path)})
            assert result["isError"] is True and SECRET not in text_of(result), (path, result)
        paths = " ".join(str(p) for p in home.secrets)
        result = await pool.bash(f"cat {paths} 2>&1; grep -rs {SECRET[:20]} {home.home} {home.agent} {home.log.parent}; echo done")
        assert SECRET not in text_of(result) and text_of(result).endswith("done\n"), result
        assert text_of(await pool.run("read", {"path": "~/.gitconfig"})) == "[user]\n\tname = Tester\n"
        assert text_of(await pool.bash("git config user.name; cat ~/.config/git/ignore")) == "Tester\n*.o\n"
        listing = text_of(await pool.bash("ls -A ~"))
        assert listing.split() == [".config", ".gitconfig", "project"], listing
        # The workspace in $HOME stays visible, and writable where the mode says so.
        written = await pool.run("write", {"path": "ok.txt", "content": "fine"})
        assert written["isError"] is (mode == "read-only")
        assert (home.ws / "ok.txt").exists() is (mode == "workspace-write")
        await pool.assert_healthy()


# -- 5. writes outside the workspace fail loudly ------------------------------------------------


async def test_writes_to_home_fail_and_the_write_tool_says_where_writes_are_allowed(home):
    async with open_pool(str(home.ws), **home.config("workspace-write")) as pool:
        for path in ("~/new.txt", str(home.home / ".bashrc"), "/etc/pi-actors-test", "../outside.txt"):
            result = await pool.run("write", {"path": path, "content": "x"})
            text = text_of(result)
            assert result["isError"] is True and text.startswith("EROFS: read-only file system"), (path, result)
            assert text.endswith(
                f"[Sandbox: writes are allowed only in the workspace {home.ws} and in /tmp (private to this session, "
                "discarded when it ends).]"
            ), text
        result = await pool.bash("echo x > ~/.profile; echo status $?")
        assert "Read-only file system" in text_of(result) and "status 1" in text_of(result)
        assert not (home.home / "new.txt").exists() and not (home.home / ".profile").exists()


async def test_the_first_command_that_writes_to_tmp_is_told_that_tmp_is_discarded(ws):
    async with open_pool(str(ws), **sandbox_config(str(ws))) as pool:
        assert text_of(await pool.bash("seq 1 3 > list.txt; cat /tmp/nothing 2>/dev/null; echo no-tmp")) == "no-tmp\n"
        spilled = await pool.bash("seq 1 30000")  # bash's own full-output file is no write of the command
        assert "Full output: /tmp/pi-bash-" in text_of(spilled) and "[Sandbox:" not in text_of(spilled)
        first = text_of(await pool.bash("echo scratch > /tmp/s; echo written"))
        assert first == (
            f"written\n\n[Sandbox: /tmp and /dev/shm are private to this session's sandbox and discarded when it ends; "
            f"only files in the workspace {os.path.realpath(ws)} are kept. Elsewhere the file system is read-only.]"
        )
        assert text_of(await pool.bash("echo again > /tmp/t; cat /tmp/s")) == "scratch\n"  # once per session


def test_the_bash_tool_says_where_writes_go():
    from pi_actors.coding.tools.bash import BASH_SPEC

    assert "/tmp is private to the session and discarded when it ends" in BASH_SPEC.description
    assert "only the working directory is writable and kept" in BASH_SPEC.description


def test_a_project_settings_file_in_the_workspace_cannot_loosen_the_sandbox(tmp_path):
    from pi_actors.cli import load_settings

    agent, ws = tmp_path / "agent", tmp_path / "ws"
    (ws / ".pi-actors").mkdir(parents=True)
    agent.mkdir()
    (agent / "settings.json").write_text('{"sandbox": {"memory": "2G"}}')
    # A tool could have written this file: it would show ~/.ssh to the next session.
    (ws / ".pi-actors" / "settings.json").write_text('{"sandbox": {"homeAllow": ["~/.ssh"], "memory": "64G"}, "x": 1}')
    settings, warnings = load_settings(str(agent), str(ws))
    assert settings == {"sandbox": {"memory": "2G"}, "x": 1}
    assert warnings == [
        f"Warning (settings): the sandbox settings in {ws}/.pi-actors/settings.json are ignored; "
        f"set them in {agent}/settings.json"
    ]


async def test_without_libseccomp_no_tool_runs_and_the_result_says_why(ws, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # as if it could not be loaded
    (ws / "data.txt").write_text("content\n")
    async with open_pool(str(ws), **sandbox_config(str(ws))) as pool:
        for name, args in (("bash", {"command": "echo ran > ran.txt"}), ("read", {"path": "data.txt"})):
            result = await pool.run(name, args)
            assert result["isError"] is True, result
            assert text_of(result).startswith(
                f"Tool {name} was not run: the sandbox could not be set up: the sandbox needs libseccomp"
            ), result
    assert not (ws / "ran.txt").exists()


async def test_a_served_sessions_processes_start_isolated_and_import_nothing_from_its_cwd(server, tmp_path):
    from _procs import cmdline

    from pi_actors.server.client import connect

    # The server fixture's root is tmp_path/served (created by the fixture).
    ws, markers = tmp_path / "served" / "project", tmp_path / "served-markers"
    ws.mkdir()
    markers.mkdir()
    _plant(ws, markers)
    async with connect(server.url, token="tok") as peer:
        sid = (await peer.call("create", {"cwd": str(ws)}))["sessionId"]
        processes = server.sessions[sid].processes
        assert processes
        for name, process in processes.items():
            assert os.readlink(f"/proc/{process.pid}/cwd") == "/", name
            assert cmdline(process.pid).split()[1:4] == ["-I", "-m", "pi_actors.runtime.child"], name
        await peer.call("remove", {"sessionId": sid})
    assert os.listdir(markers) == []


async def test_the_log_file_is_hidden_from_tools(scripted, env, ws):
    log = ws / "logs" / "pi.log"  # outside the workspace, outside /tmp; the first run creates it
    log.parent.mkdir()
    for command in ("echo first", f"cat {log}; echo done"):
        scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": command})]))
        scripted.script.append(Reply(text="Done."))
        done = await env.run("--model", "scripted/scripted-model", "--no-session", "--log-file", str(log), "--mode", "json", "go")
        assert done.returncode == 0, done.stderr.decode()
    (end,) = [json.loads(line) for line in done.stdout.decode().splitlines() if '"tool_execution_end"' in line]
    text = end["result"]["content"][0]["text"]
    assert text.endswith("done\n") and '"actor"' not in text, text
    assert '"actor": "coordinator"' in log.read_text()  # the actors do log there; no tool sees it
