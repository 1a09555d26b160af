"""Recovery benchmark: from SIGKILL of an actor to the next successful LLM request.

    .venv/bin/python -m benchmarks.recovery [--rounds N]

The local placement (the CLI's, store with coordinator) against the scripted model. For each
actor kind — provider, tool pool, coordinator (with the store; the whole set restarts) — N
times: the session is idle, the actor's process is SIGKILLed, and a prompt is sent as soon as it has been reaped;
the figure is the time from the kill to the end of that prompt's successful reply (for the
tool pool, a reply that runs one tool call, so that the restarted pool is really used). The
baseline, measured in the same run, is the same prompt with nothing killed; each median is
also given as a ratio against it. Target (issue 13): under 1 s for provider and pool.

The placement keeps warm spares (``spares=True``, as the interactive, rpc and TUI modes do):
a dead provider or pool is replaced by a standby that has already started, imported its SDK
or started its sandbox zygote; a new standby is started behind it. Rounds are 3 s apart so
that the new standby is warm before the next kill, as it would be in a session where
crashes are rare; a kill right after a restart costs a cold start (about 1-2 s here).

A second pass measures the same without spares (``spares=False``: print mode, the server, or
``supervision.spares: false``): every restart is a cold start.

Back-off is off here (``backoff_first=0``) so that every round measures the restart itself:
with the default policy the first restart in a window is immediate too, and later ones wait
0.25 s, 0.5 s, 1 s, then 2 s (see ``RestartPolicy``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time

import trio

from pi_actors.actors.local import open_local_runtime
from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.runtime import RestartPolicy
from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

#: Seconds between rounds (see main).
SETTLE = 3.0


def _config(server: ScriptedLLM, cwd: str) -> dict:
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    return runtime_config(
        settings={"retry": {"enabled": False}, "supervision": {"maxRestarts": 1000}}, model=model, thinking="off",
        tools=["bash"], cwd=cwd, system_prompt="bench", agent_dir=cwd, session_dir=os.path.join(cwd, "sessions"),
        runtime_keys={"scripted": "k"}, key_sources={},
    )  # fmt: skip


async def _prompt(coordinator, text: str) -> None:
    async with coordinator.open_call("prompt", {"text": text, "events": False}) as call:
        await call.result()
    state = await coordinator.call("get_messages")
    last = state["messages"][-1]
    assert last["role"] == "assistant" and last["stopReason"] == "stop", last


def _ms(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values) * 1000:7.1f} ms  min {values[0] * 1000:7.1f}  max {values[-1] * 1000:7.1f}"


async def main(rounds: int) -> None:
    for spares in (True, False):
        await measure(rounds, spares)


async def measure(rounds: int, spares: bool) -> None:
    def script(body: dict) -> Reply:
        # A request whose last message is the user's "tool" prompt answers with a tool call.
        last = (body.get("messages") or [{}])[-1]
        if last.get("role") == "user" and last.get("content") == "tool":
            return Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo ok"})])
        return Reply(text="ok")

    server = ScriptedLLM(script)
    with tempfile.TemporaryDirectory() as cwd:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            processes: dict = {}
            async with open_local_runtime(
                _config(server, cwd), processes=processes, store_with_coordinator=True, restart_coordinator=True,
                announce=False, spares=spares, policy=RestartPolicy(max_restarts=1000, backoff_first=0.0),
            ) as coordinator:  # fmt: skip
                await _prompt(coordinator, "warm")
                await _prompt(coordinator, "tool")
                results: dict[str, list[float]] = {"baseline (no kill)": [], "baseline, one tool call": []}
                for _ in range(rounds):
                    start = time.perf_counter()
                    await _prompt(coordinator, "plain")
                    results["baseline (no kill)"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    await _prompt(coordinator, "tool")
                    results["baseline, one tool call"].append(time.perf_counter() - start)
                for name, prompt, note in (
                    ("provider", "plain", "provider restarted"),
                    ("tool-pool", "tool", "tool-pool restarted"),
                    ("coordinator", "plain", "coordinator restarted"),
                ):
                    times = results[f"SIGKILL {name} -> next reply"] = []
                    for _ in range(rounds):
                        # Crashes are rare: give the restarted actor's replacement spare time to
                        # start and warm up, as it would have in a real session.
                        await trio.sleep(SETTLE)
                        count = sum(note in n for n in coordinator.notes)
                        victim = processes[name]
                        start = time.perf_counter()
                        os.kill(victim.pid, signal.SIGKILL)
                        await victim.exited.wait()  # the prompt comes after the death, not racing it
                        await _prompt(coordinator, prompt)
                        times.append(time.perf_counter() - start)
                        await coordinator.wait_note(note, count + 1)
                        # Let the new actor settle (the pool warms its workers) before the next kill.
                        await _prompt(coordinator, prompt)
            nursery.cancel_scope.cancel()
    base = statistics.median(results["baseline (no kill)"])
    tool_base = statistics.median(results["baseline, one tool call"])
    print(f"recovery after SIGKILL, {rounds} rounds (local placement, store with coordinator), "
          f"{'with warm spares (interactive, TUI, rpc)' if spares else 'without spares (cold restarts)'}")
    for label, values in results.items():
        ref = tool_base if "tool" in label else base
        print(f"  {label:<34} {_ms(values)}  ({statistics.median(values) / ref:5.1f}x its baseline)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    trio.run(main, parser.parse_args().rounds)
