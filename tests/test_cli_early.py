"""Print mode starts the provider before the CLI's own imports (``cli._early``): the process is
started as ``runtime.prestart_actor`` starts one, warms the SDK the model will likely use, and
is never left behind when the CLI stops before booting it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _procs import cmdline, environ_has, live_pids

from pi_actors.ai import builtin_models
from pi_actors.ai.registry import BUILTIN_PROVIDER_MODULES
from pi_actors.cli import _early
from pi_actors.cli._early import BUILTIN_PROVIDER_APIS, SDK_MODULES, sdk_module_hint, start_provider_early
from pi_actors.runtime import prestart_command


def test_the_hint_tables_agree_with_the_registry_and_the_builtin_catalog():
    assert SDK_MODULES == BUILTIN_PROVIDER_MODULES
    apis: dict[str, set[str]] = {}
    for m in builtin_models():
        apis.setdefault(m.provider, set()).add(m.api)
    assert BUILTIN_PROVIDER_APIS == {p: a.pop() for p, a in apis.items() if len(a) == 1}


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        (None, "scripted/scripted-model", "pi_actors.ai.providers.openai_completions"),  # models.json's api
        ("scripted", None, "pi_actors.ai.providers.openai_completions"),
        (None, "anthropic/claude-sonnet-4-5", "pi_actors.ai.providers.anthropic_messages"),  # built in
        ("OpenAI", "gpt-5", "pi_actors.ai.providers.openai_responses"),
        (None, "claude-sonnet-4-5", None),  # no provider named: the CLI decides later
        (None, None, None),
        ("nobody", None, None),
    ],
)
def test_the_sdk_hint_names_the_provider_module_the_arguments_point_to(tmp_path: Path, provider, model, expected):
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"scripted": {"api": "openai-completions"}}}))
    assert sdk_module_hint(provider, model, str(tmp_path)) == expected


def test_a_missing_or_broken_models_json_leaves_only_the_builtin_hints(tmp_path: Path):
    assert sdk_module_hint(None, "scripted/x", str(tmp_path)) is None
    (tmp_path / "models.json").write_text("{not json")
    assert sdk_module_hint(None, "anthropic/x", str(tmp_path)) == "pi_actors.ai.providers.anthropic_messages"
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"scripted": ["not", "an", "object"]}}))
    assert sdk_module_hint(None, "scripted/x", str(tmp_path)) is None


def test_the_early_provider_is_started_as_prestart_actor_starts_one(monkeypatch):
    seen: dict = {}

    class Refused(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, argv, **kwargs):
            seen.update(argv=argv, **kwargs)
            raise OSError("not started in this test")

    monkeypatch.setattr(_early.subprocess, "Popen", Refused)
    with pytest.raises(OSError):
        start_provider_early("pi_actors.ai.providers.openai_completions")
    module = "pi_actors.ai.providers.openai_completions:prepare"
    assert seen["argv"] == prestart_command("provider", ("pi_actors.actors.provider", module))
    assert seen["cwd"] == "/" and len(seen["pass_fds"]) == 2


def test_a_given_up_early_provider_is_killed_and_reaped():
    early = start_provider_early(None)
    early.abandon()
    assert early.popen.returncode is not None
    assert all(sock.fileno() == -1 for sock in early.ends.values())
    early.abandon()


async def test_a_print_mode_run_that_fails_on_its_configuration_leaves_no_process_behind(env):
    # The provider is started before the model is resolved ("scripted/..." names a provider of
    # models.json); the unknown model then stops the CLI, which must take the provider along.
    done = await env.run("--model", "scripted/no-such-model", "--no-session", "-p", "hi")
    assert done.returncode == 1
    assert done.stderr.decode().strip() == 'Error: Model "no-such-model" not found. Use --list-models to see available models.'
    left = live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}"))
    assert not left, [cmdline(p) for p in left]


async def test_a_print_mode_run_boots_the_provider_it_started_ahead(scripted, env):
    from pi_actors.testing.scripted_server import Reply

    scripted.script.append(Reply(text="early and right", chunks=2))
    log = env.work / "log.jsonl"
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--log-file", str(log), "-p", "hi")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "early and right\n"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    # The provider got its configuration (the log file) at boot and served the stream.
    assert any(e.get("actor") == "provider" and e.get("event") == "stream_start" for e in events), events[:5]


# Loaded by the CLI itself when it looks at its extensions (and again by the extension host):
# writes, for the process that loads it, which actors are already its children.
_LOOKOUT = """
import os

def _actor_children():
    me = str(os.getpid())
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = f.read().rpartition(")")[2].split()[1]
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\\0")
        except (OSError, IndexError):
            continue
        if ppid == me and b"pi_actors.runtime.child" in argv:
            found += [(actor, name) for actor in ("provider", "tool-pool") if actor.encode() in argv]
    pool = [pid for actor, pid in found if actor == "tool-pool"]
    return (",".join(sorted(actor for actor, _pid in found)) or "-") + " " + (pool[0] if pool else "-")

with open(OUT, "a") as out:
    out.write(f"{os.getpid()} {_actor_children()}\\n")

def register(pi):
    pass
"""


async def test_print_mode_starts_the_provider_before_looking_at_extensions(scripted, env):
    # Looking at the extensions (installed packages, entry points, the coding layer's imports)
    # is most of the CLI's own start-up: the provider's start overlaps it.
    from pi_actors.testing.scripted_server import Reply

    seen = env.work / "seen.txt"
    extension = env.work / "lookout.py"
    extension.write_text(f"OUT = {str(seen)!r}\n" + _LOOKOUT)
    scripted.script.append(Reply(text="looked", chunks=1))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-e", str(extension), "-p", "hi")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "looked\n"
    first_load = seen.read_text().splitlines()[0]  # the CLI's look comes before the host's load
    assert first_load.split()[1] in ("provider", "provider,tool-pool"), seen.read_text()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [(("-p", "hi"), "provider,tool-pool"), (("--mode", "rpc"), "tool-pool"), ((), "tool-pool")],
    ids=["print", "rpc", "interactive"],
)
async def test_every_mode_forks_its_tool_pool_before_running_any_extension_code(scripted, env, mode, expected):
    # The pool is forked from the CLI (``_early.fork_tool_pool``): before any code of an
    # extension runs in the CLI, so that none of it is in the pool's memory, and early, so
    # that its sandbox is ready sooner. (Only print and JSON mode start the provider early.)
    # RPC and the plain interactive mode end at the end of their empty stdin.
    from pi_actors.testing.scripted_server import Reply

    seen = env.work / "seen.txt"
    extension = env.work / "lookout.py"
    extension.write_text(f"OUT = {str(seen)!r}\n" + _LOOKOUT)
    scripted.script.append(Reply(text="forked", chunks=1))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-e", str(extension), *mode)
    assert done.returncode == 0, done.stderr.decode()
    assert seen.read_text().splitlines()[0].split()[1] == expected, seen.read_text()


async def test_the_forked_tool_pool_holds_no_credential_of_the_environment_and_dies_with_the_cli(scripted, env):
    # The CLI's environment has a credential; the pool it forks shows the scrubbed environment
    # and an actor's command line in /proc (what a tool host or ``ps`` sees), and a SIGKILL of
    # the CLI takes it along like every other actor.
    import os
    import signal

    import trio
    from _procs import parent_pid, wait_exited
    from conftest import CLI

    from pi_actors.testing.scripted_server import Reply
    from pi_actors.testing.wire_formats import ScriptToolCall

    secret = "forked-pool-must-not-hold-this-0042"
    env.env["SOME_SERVICE_API_KEY"] = secret
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "sleep 1000"})]))
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--no-session", "--mode", "json", "wait"],
        env=env.env, cwd=env.work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        buffer = b""
        with trio.fail_after(30):
            while b'"tool_execution_start"' not in buffer:
                data = await proc.stdout.receive_some()
                assert data, "the CLI ended before the tool call started"
                buffer += data
        pools = live_pids(lambda pid: parent_pid(pid) == proc.pid and cmdline(pid).endswith("pi_actors.runtime.child tool-pool"))
        assert len(pools) == 1, [cmdline(p) for p in live_pids(lambda pid: parent_pid(pid) == proc.pid)]
        with open(f"/proc/{pools[0]}/environ", "rb") as f:
            environ = f.read()
        assert f"PI_ACTORS_TEST_MARKER={env.marker}".encode() in environ.split(b"\0")
        assert secret.encode() not in environ
        marked = live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}"))
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
        await wait_exited(marked, timeout=10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_rpc_mode_boots_the_tool_pool_it_forked_and_runs_its_tools_there(scripted, env):
    # The pool forked before the extensions were looked at is the one the runtime boots (not
    # given up for a new one): once a tool call has run, it is still the CLI's child, and it
    # has started the sandbox (a process of its own) — one never booted only waits.
    from _procs import parent_pid
    from support.rpc import open_rpc

    from pi_actors.testing.scripted_server import Reply
    from pi_actors.testing.wire_formats import ScriptToolCall

    seen = env.work / "seen.txt"
    extension = env.work / "lookout.py"
    extension.write_text(f"OUT = {str(seen)!r}\n" + _LOOKOUT)
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo ran"})]))
    scripted.script.append(Reply(text="Done."))
    rpc = await open_rpc(env, "--model", "scripted/scripted-model", "--no-session", "-e", str(extension))
    response = await rpc.request({"id": "p", "type": "prompt", "message": "go"})
    assert response["success"] is True, response
    end = await rpc.until(lambda o: o.get("type") == "tool_execution_end")
    assert "ran" in json.dumps(end["result"]), end
    forked = seen.read_text().splitlines()[0].split()[2]
    pools = live_pids(lambda pid: parent_pid(pid) == rpc.proc.pid and cmdline(pid).endswith("pi_actors.runtime.child tool-pool"))
    assert int(forked) in pools, (forked, pools)
    assert live_pids(lambda pid: parent_pid(pid) == int(forked)), "the forked pool was not booted"
    await rpc.until(lambda o: o.get("type") == "agent_end")
    assert await rpc.close() == 0
