"""What the coordinator keeps per prompt of a long session stays small (issue 15, budget (g)
memory: its growth per prompt against the bytes the prompt adds to the session file).

The coordinator and its session store run in this process (as ``--mode rpc`` places them:
one process), the provider, the tool pool and the scripted model in their own processes, so
that what this process still holds after a run of prompts is what the coordinator and the
store keep. Measured with tracemalloc: the bytes allocated by pi_actors' code (the
transcript's Structs and strings, the store's index) that are still alive after a full
collection, between two points of the session, so that what is made once (caches, the
writer's first lines) does not count — and neither do the interpreter's free lists, which
trio's internals fill slowly up to their fixed size. A count of bytes, not a timing.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc
from types import SimpleNamespace

import msgspec
import trio
from conftest import actor_config

from pi_actors.actors.local import run_coordinator_with_store
from pi_actors.actors.memory import release_free_memory
from pi_actors.runtime import link_pair, open_peer, start_actor

#: prompts before tracing starts, prompts before the first count, prompts counted
WARM_UP, SETTLE, COUNTED = 3, 3, 24
#: feabec4 kept ~3.0 kB per prompt of this shape (4 entries: the user's prompt, a bash call,
#: its result, the final text) by this count, for ~1.5 kB of session file; fb8aee7 ~2.38 kB
#: (the session writer's index ~110 B per entry); now ~2.06 kB (~30 B per entry)
BOUND_PER_PROMPT = 2_250


def _scripted_model(tmp_path) -> tuple[subprocess.Popen, int]:
    """The scripted model as a process, answering every prompt with one bash call, then text."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "cycle": True,
        "replies": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo ok"}}]},
            {"text": "Done: the command printed ok."},
        ],
    }))  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_actors.testing.scripted_server", "--script", str(script)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _kept_by_pi_actors() -> int:
    """Bytes alive now (after a full collection) that pi_actors' code allocated while traced."""
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, f"{_PACKAGE}{os.sep}*")])
    return sum(stat.size for stat in snapshot.statistics("filename"))


_PACKAGE = os.path.dirname(os.path.abspath(__import__("pi_actors").__file__))


async def test_a_long_session_keeps_about_one_session_line_of_memory_per_prompt(tmp_path):
    model, port = _scripted_model(tmp_path)
    try:
        sessions = tmp_path / "sessions"
        config = actor_config(
            SimpleNamespace(base_url_openai=f"http://127.0.0.1:{port}/v1"), tmp_path, tools=("bash",),
            session={"sessionDir": str(sessions), "agentDir": str(tmp_path)},
        )  # fmt: skip
        wire = msgspec.to_builtins
        with trio.fail_after(300):
            async with trio.open_nursery() as nursery:
                links = {}
                for name, entry, part in (
                    ("provider", "pi_actors.actors.provider:run_provider", config.provider),
                    ("tools", "pi_actors.actors.tool_pool:run_tool_pool", config.tools),
                ):
                    ours, theirs = link_pair()
                    await start_actor(nursery, name=f"memory-test-{name}", entry=entry, links={"coordinator": theirs}, config=wire(part))
                    links[name] = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
                ui_end, coordinator_end = link_pair()
                links["ui"] = trio.SocketStream(trio.socket.from_stdlib_socket(coordinator_end))
                nursery.start_soon(run_coordinator_with_store, links, {"coordinator": wire(config.coordinator), "store": wire(config.store)})
                ui_stream = trio.SocketStream(trio.socket.from_stdlib_socket(ui_end))
                async with open_peer(ui_stream, side="client", role="ui", name="coordinator") as ui:

                    async def prompt(i: int) -> None:
                        await ui.call("prompt", {"text": f"prompt {i}: run it", "events": False})

                    for i in range(WARM_UP):
                        await prompt(i)
                    (path,) = [os.path.join(sessions, name) for name in os.listdir(sessions) if name.endswith(".jsonl")]
                    tracemalloc.start()
                    try:
                        for i in range(WARM_UP, WARM_UP + SETTLE):
                            await prompt(i)
                        size_before, kept_before = os.path.getsize(path), _kept_by_pi_actors()
                        for i in range(WARM_UP + SETTLE, WARM_UP + SETTLE + COUNTED):
                            await prompt(i)
                        kept = _kept_by_pi_actors() - kept_before
                    finally:
                        tracemalloc.stop()
                    file_per_prompt = (os.path.getsize(path) - size_before) / COUNTED
                    state = await ui.call("get_state")
                    messages = await ui.call("get_messages")
                nursery.cancel_scope.cancel()
    finally:
        model.kill()
        model.wait()
    # Every prompt ran whole: 4 messages each, the last one the scripted text.
    assert state["messageCount"] == 4 * (WARM_UP + SETTLE + COUNTED)
    assert messages["messages"][-1]["content"][0]["text"] == "Done: the command printed ok."
    assert 1_000 < file_per_prompt < 2_500, file_per_prompt
    per_prompt = kept / COUNTED
    assert per_prompt < BOUND_PER_PROMPT, f"{per_prompt:.0f} B kept per prompt (session file: {file_per_prompt:.0f} B per prompt)"


def _resident_kb() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])


def test_memory_freed_inside_the_heap_goes_back_to_the_system_when_a_run_ends():
    # What the coordinator does once per run: blocks freed between live ones (the holes a
    # run's temporary buffers leave) are handed back, not kept resident for the session.
    blocks = [bytearray(16_000) for _ in range(3_000)]  # ~48 MB, every page touched
    release_free_memory()
    del blocks[::2]  # ~24 MB of holes between live blocks: free() alone keeps them
    held = _resident_kb()
    assert release_free_memory() is True
    assert _resident_kb() < held - 8_000, (held, _resident_kb())
