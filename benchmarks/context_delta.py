"""Per-turn cost of handing the context to the provider actor: whole vs. delta (issue 15).

``python -m benchmarks.context_delta [--turns 300] [--rounds 5]``

A session grows by one bash turn at a time (an assistant message with thinking and a tool
call, a tool result with ~1 kB of output). At every turn the request's context crosses the
coordinator–provider link, timed in one process, doing exactly the work the two actors do
for it:

* **whole** (before): ``to_plain`` of the whole context in the coordinator, the runtime
  codec's ``encode_message`` of the ``stream`` call, ``decode_message`` and the router's
  strict ``msgspec.convert`` into ``StreamArgs`` in the provider;
* **delta** (now): ``ContextSender.plan`` (the prefix compare) and ``to_plain`` of the
  appended messages only, the same encode/decode/convert of the smaller call, and
  ``ContextCache.resolve`` rebuilding the list in the provider.

Not included (the same on both paths): the provider's own serialization of the HTTP
request body, and the agent loop's work before ``stream_fn``. Reported: the median per-turn
time at turns 1–10 and at the last ten, the ratio whole/delta there, and the prefix compare
alone for a context of the final size (identical objects, and equal-but-rebuilt objects as
``convert_to_llm`` makes for bashExecution/custom/summary entries).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import msgspec

from pi_actors.actors._context_cache import ContextCache, ContextSender
from pi_actors.ai import types as T
from pi_actors.protocol.provider import StreamArgs
from pi_actors.runtime import protocol as P

MODEL = T.Model(id="m", api="openai-completions", provider="p", base_url="http://127.0.0.1:1/v1")
TOOLS = [
    T.Tool(
        name="bash",
        description="Run a command. " * 20,
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
            "required": ["command"],
        },
    )
]


def _turn(i: int) -> list[T.Message]:
    text = "the quick brown fox jumps over the lazy dog. " * (1 + i % 5)
    call = T.ToolCall(id=f"call_{i}", name="bash", arguments={"command": f"ls -la dir{i}"})
    assistant = T.AssistantMessage(
        content=[T.ThinkingContent(thinking=text), call], api="openai-completions", provider="p", model="m",
        usage=T.Usage(input=1000 + i, output=50), stop_reason="toolUse", timestamp=1_700_000_000_000 + i,
    )  # fmt: skip
    result = T.ToolResultMessage(
        tool_call_id=f"call_{i}", tool_name="bash", content=[T.TextContent(text="drwxr-xr-x 2 root root 4096 x\n" * 34)],
        is_error=False, timestamp=1_700_000_000_500 + i,
    )  # fmt: skip
    return [assistant, result]


def _fixed() -> dict[str, Any]:
    return {"model": T.to_plain(MODEL), "options": {"sessionId": "s"}, "requestId": "r-1"}


def _cross(args: dict[str, Any]) -> StreamArgs:
    """The link: encode in the coordinator, decode and validate in the provider."""
    payload = P.encode_message(P.Call(id=1, method="stream", args=args))
    return msgspec.convert(P.decode_message(payload).args, StreamArgs, strict=True)  # type: ignore[attr-defined]


def whole_turn(context: T.Context) -> T.Context:
    args = _cross({**_fixed(), "context": T.to_plain(context)})
    return args.context


def delta_turn(context: T.Context, sender: ContextSender, cache: ContextCache) -> T.Context:
    messages, label = sender.plan("session", context.messages)
    wire = T.Context(system_prompt=context.system_prompt, messages=messages, tools=context.tools)
    args = _cross({**_fixed(), "context": T.to_plain(wire), "cached": T.to_plain(label)})
    assert args.cached is not None
    full = cache.resolve(args.cached, args.context.messages)
    return T.Context(system_prompt=args.context.system_prompt, messages=full, tools=args.context.tools)


def _session(turns: int, path: str) -> list[float]:
    """Seconds per turn for one session of ``turns`` turns on ``path`` ("whole"/"delta")."""
    sender, cache = ContextSender(), ContextCache()
    messages: list[Any] = [T.UserMessage(content="go", timestamp=1)]
    times = []
    for i in range(turns):
        context = T.Context(system_prompt="You are a test. " * 50, messages=list(messages), tools=TOOLS)
        start = time.perf_counter()
        got = whole_turn(context) if path == "whole" else delta_turn(context, sender, cache)
        times.append(time.perf_counter() - start)
        if i in (0, turns - 1):
            assert len(got.messages) == len(messages)
        messages += _turn(i)
    return times


def _compare_cost(n_messages: int, repeat: int = 200) -> tuple[float, float]:
    """Seconds for ``new[:n] == prev`` with identical, and with equal rebuilt, elements."""
    prev: list[Any] = []
    i = 0
    while len(prev) < n_messages:
        prev += _turn(i)
        i += 1
    same = prev + _turn(i)
    rebuilt = [msgspec.structs.replace(m) for m in prev] + _turn(i)
    out = []
    for new in (same, rebuilt):
        n = len(prev)
        start = time.perf_counter()
        for _ in range(repeat):
            assert new[:n] == prev
        out.append((time.perf_counter() - start) / repeat)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ns = ap.parse_args()
    per: dict[str, list[list[float]]] = {"whole": [], "delta": []}
    for _ in range(ns.rounds):  # alternate, so that machine noise hits both alike
        for path in ("whole", "delta"):
            per[path].append(_session(ns.turns, path))

    def median_ms(path: str, turns: range) -> float:
        return statistics.median(t for run in per[path] for t in (run[i] for i in turns)) * 1e3

    first, last = range(0, 10), range(ns.turns - 10, ns.turns)
    print(f"context handed to the provider, per turn (median of {ns.rounds} sessions, ms)")
    print(f"{'':>10} {'turns 1-10':>12} {f'turns {ns.turns - 9}-{ns.turns}':>14}")
    for path in ("whole", "delta"):
        print(f"{path:>10} {median_ms(path, first):12.3f} {median_ms(path, last):14.3f}")
    print(f"{'ratio':>10} {median_ms('whole', first) / median_ms('delta', first):12.1f}x "
          f"{median_ms('whole', last) / median_ms('delta', last):13.1f}x")  # fmt: skip
    n = 1 + 2 * (ns.turns - 1)
    same, rebuilt = _compare_cost(n)
    print(f"prefix compare at {n} messages: {same * 1e6:.1f} µs (same objects), {rebuilt * 1e6:.1f} µs (rebuilt, equal)")


if __name__ == "__main__":
    main()
