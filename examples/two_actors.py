"""Two actors with typed methods on the pi-actors runtime alone — no agent, no LLM.

A *calculator* actor serves ``add`` (a typed request/reply) and ``count`` (a typed stream);
a *reporter* actor serves ``summarize`` and is itself a client of the calculator. The same
actor code runs in both placements:

    python examples/two_actors.py tasks       # both actors as trio tasks in this process
    python examples/two_actors.py processes   # each actor in its own child process

Either way the actors talk through a socketpair, with the hello handshake, strict CBOR
frames and the typed router checking every argument (try ``--bad`` to see a mistyped
argument refused as ``invalid_request`` naming the field).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import trio

from pi_actors.runtime import (
    Empty,
    Interface,
    Method,
    RemoteError,
    Router,
    TypedCall,
    WireStruct,
    call_method,
    implements,
    link_pair,
    open_method,
    open_peer,
    start_actor,
)

# -- the contract: declared once, used by both sides ------------------------------------------


class AddArgs(WireStruct):
    a: int
    b: int


class Sum(WireStruct):
    value: int


class CountArgs(WireStruct):
    upto: int


class Tick(WireStruct):
    n: int


ADD = Method("add", args=AddArgs, result=Sum, doc="a + b")
COUNT = Method("count", args=CountArgs, result=Empty, chunk=Tick, doc="streams 0 .. upto-1")
CALCULATOR = Interface("calculator", [ADD, COUNT])


class SummarizeArgs(WireStruct):
    numbers: list[int]


class Summary(WireStruct):
    total: int
    ticks: int


SUMMARIZE = Method("summarize", args=SummarizeArgs, result=Summary, doc="adds the numbers through the calculator")
REPORTER = Interface("reporter", [SUMMARIZE])


# -- the actors ---------------------------------------------------------------------------------


class Calculator:
    @implements(ADD)
    async def add(self, args: AddArgs, call: TypedCall[AddArgs, None]) -> Sum:
        return Sum(value=args.a + args.b)

    @implements(COUNT)
    async def count(self, args: CountArgs, call: TypedCall[CountArgs, Tick]) -> Any:
        for n in range(args.upto):
            yield Tick(n=n)


class Reporter:
    def __init__(self, calculator: Any) -> None:
        self.calculator = calculator  # a Peer: the reporter is the calculator's client

    @implements(SUMMARIZE)
    async def summarize(self, args: SummarizeArgs, call: TypedCall[SummarizeArgs, None]) -> Summary:
        total = 0
        for number in args.numbers:
            total = (await call_method(self.calculator, ADD, AddArgs(a=total, b=number))).value
        async with open_method(self.calculator, COUNT, CountArgs(upto=len(args.numbers))) as stream:
            ticks = [tick.n async for tick in stream]
        return Summary(total=total, ticks=len(ticks))


# -- entry points: what a process (or a task) runs ----------------------------------------------


async def run_calculator(links: dict[str, trio.abc.Stream], config: Any) -> None:
    """Serve the calculator on the ``caller`` link until the caller closes it."""
    router = Router.serving(Calculator(), CALCULATOR)
    async with open_peer(links["caller"], side="server", role="calculator", name="caller", handler=router) as peer:
        await peer.closed_event.wait()


async def run_reporter(links: dict[str, trio.abc.Stream], config: Any) -> None:
    """Call the calculator on ``calculator``; serve the reporter on ``caller``."""
    async with open_peer(links["calculator"], side="client", role="reporter", name="calculator") as calculator:
        router = Router.serving(Reporter(calculator), REPORTER)
        async with open_peer(links["caller"], side="server", role="reporter", name="caller", handler=router) as peer:
            await peer.closed_event.wait()


def _stream(sock: Any) -> trio.SocketStream:
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


async def main(placement: str, bad: bool) -> None:
    me_reporter, reporter_me = link_pair()
    reporter_calc, calc_reporter = link_pair()
    async with trio.open_nursery() as nursery:
        if placement == "tasks":
            nursery.start_soon(run_calculator, {"caller": _stream(calc_reporter)}, None)
            nursery.start_soon(run_reporter, {"caller": _stream(reporter_me), "calculator": _stream(reporter_calc)}, None)
        else:
            here = os.path.dirname(os.path.abspath(__file__))
            await start_actor(nursery, name="calculator", entry="two_actors:run_calculator", links={"caller": calc_reporter}, import_paths=(here,))
            await start_actor(
                nursery,
                name="reporter",
                entry="two_actors:run_reporter",
                links={"caller": reporter_me, "calculator": reporter_calc},
                import_paths=(here,),
            )
        async with open_peer(_stream(me_reporter), side="client", role="main", name="reporter") as reporter:
            if bad:
                try:
                    await reporter.call("summarize", {"numbers": [1, "two", 3]})
                except RemoteError as exc:
                    print(f"refused: {exc.code}: {exc.message}")
            else:
                summary = await call_method(reporter, SUMMARIZE, SummarizeArgs(numbers=[1, 2, 3, 4]))
                print(f"{placement}: total={summary.total} ticks={summary.ticks}")
        # Closing our link ends the reporter, whose exit closes the calculator's link.
        if placement == "tasks":
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    where = args[0] if args else "tasks"
    if where not in ("tasks", "processes"):
        sys.exit(f"usage: {sys.argv[0]} [tasks|processes] [--bad]")
    trio.run(main, where, "--bad" in sys.argv)
