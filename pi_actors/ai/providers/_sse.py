"""Server-sent events, decoded from raw response bytes (the W3C event-stream format).

Why our own: the SDKs build a typed object (pydantic) for every event, which costs more than
everything else a provider does per delta. The providers keep the SDK for the request (auth,
headers, retries, HTTP errors) and read the body's bytes through this decoder.

Contract:
- ``SSEDecoder.feed(data)`` takes any slice of the byte stream and returns the events it
  completed, in order, as ``(event_name, data)``: ``event_name`` is the ``event:`` field or
  None, ``data`` the ``data:`` lines joined by ``\\n`` (bytes). Lines may end in ``\\n``,
  ``\\r\\n`` or ``\\r``, split anywhere across feeds. Comments (``:``) and ``id:``/``retry:``
  are ignored; an event without data is not dispatched (as the standard says).
- ``SSEDecoder.close()`` returns a last event that was complete except for its closing blank
  line (some servers end that way); anything else left over is a truncation the provider
  notices by its missing closing events.
- ``read_sse(run, chunks, handle, runs=None)`` drives a decoder over a response body, calling
  ``handle(event_name, data)`` per event, checking for an abort after each one; every read
  is under the call's idle timeout (``StreamRun.read_chunk``). With ``runs`` (a
  :class:`TextRuns`), the plain text deltas among one read's events are applied a run at a
  time (below).

Text runs. A long reply is tens of thousands of events that each add a few characters to one
text block; handled one by one they cost a JSON tree, a mapper walk and an event each, which
made the provider the bottleneck of a streamed reply. A provider that passes ``runs`` says,
per event, whether it is a *plain text delta* (``runs.plain(name, data)`` returns the block's
key and the text, else None): an event that does nothing but append text to one text block.
Consecutive plain events of one read with the same key are joined and applied with one
``runs.apply(key, text)`` (one ``text_delta`` event for the run); any other event ends the
run (applied first, so the order of everything is kept) and goes to ``handle`` as before. The
event stream stays valid (each delta event's ``delta`` is the text appended; the final
message is the same, however the bytes were split into reads); only the number of delta
events differs. ``plain`` must have no effect but on the message's identity fields
(response id and model), and must be sure: anything it is not sure of goes to ``handle``,
which is always right. The abort flag is checked after every run applied, as after every
event. Once a plain event has been decoded, its *shape* (its bytes but the text) finds the
run of events like it at the start of each later read without decoding them one by one
(``_text_shape``, which says why that is the same); the shape is dropped as soon as an event
goes to ``handle`` (the provider's state, on which ``plain`` may depend, may have changed).
- ``decode_json(data)`` parses one event's data; malformed data raises ``ProviderError`` with
  ``Malformed stream data (not JSON): ...``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import Any, Protocol

import msgspec

from ._common import ProviderError, StreamRun
from ._text_shape import Shape, learn

__all__ = ["SSEDecoder", "TextRuns", "read_sse", "decode_json"]

SSEEvent = tuple["str | None", bytes]

_decode = msgspec.json.Decoder().decode


def decode_json(data: bytes) -> Any:
    try:
        return _decode(data)
    except msgspec.DecodeError as exc:
        shown = data[:200].decode("utf-8", "replace")
        raise ProviderError(f"Malformed stream data (not JSON): {exc}: {shown!r}") from None


def _parse_block(block: bytes) -> SSEEvent | None:
    """One event block (lines, no blank line inside) to ``(event, data)`` or None."""
    if block.startswith(b"data: ") and b"\n" not in block:
        return None, block[6:]  # the common case: one data line
    name: str | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == 58:  # b":" comment
            continue
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if not data:
        return None
    return name, b"\n".join(data)


class SSEDecoder:
    __slots__ = ("_buf", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # the previous feed ended in "\r" (its "\n" may follow)

    def feed(self, data: bytes) -> list[SSEEvent]:
        return self.events(self.complete(data))

    def complete(self, data: bytes) -> bytes:
        """Take ``data``; the complete events it finishes, as bytes (events separated by
        blank lines, line ends made ``\\n``, the last event's blank line cut off), for
        :meth:`events`; empty when none is complete yet."""
        if not data:
            return b""
        if self._cr and data[:1] == b"\n":
            data = data[1:]
        self._cr = data[-1:] == b"\r"
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + data if self._buf else data
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return b""
        complete, self._buf = buf[:end], buf[end + 2:]
        return complete

    @staticmethod
    def events(complete: bytes) -> list[SSEEvent]:
        """The events of :meth:`complete`'s bytes (or of any part of them that starts where
        an event starts)."""
        if not complete:
            return []
        if complete[:6] == b"data: " and complete.count(b"\n") == 2 * complete.count(b"\n\ndata: "):
            # The common case: nothing but one-line ``data:`` events (every newline is in a
            # separator), cut apart in one pass without a copy of each block.
            return [(None, d) for d in complete[6:].split(b"\n\ndata: ")]
        blocks = complete.split(b"\n\n")
        out: list[SSEEvent] = []
        append = out.append
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                append((None, block[6:]))  # the common case, inline
                continue
            block = block.strip(b"\n")
            if block:
                event = _parse_block(block)
                if event is not None:
                    append(event)
        return out

    def close(self) -> list[SSEEvent]:
        rest, self._buf = self._buf, b""
        if not rest.endswith(b"\n"):
            rest = rest.rpartition(b"\n")[0]  # a line cut off mid-way does not count
        rest = rest.strip(b"\n")
        event = _parse_block(rest) if rest else None
        return [event] if event is not None else []


class TextRuns(Protocol):
    """A provider's plain text deltas, applied a run at a time (see the module docstring)."""

    def plain(self, name: str | None, data: bytes) -> tuple[Hashable, str] | None:
        """``(key, text)`` when the event only appends ``text`` to the text block ``key``
        names; None for anything else (the event then goes to the provider's handler)."""
        ...

    async def apply(self, key: Hashable, text: str) -> None:
        """Append ``text``, the joined text of a run of plain events, to the block ``key``
        names, exactly as applying the run's events one by one would (one delta event)."""
        ...


async def read_sse(run: StreamRun, chunks: AsyncIterator[bytes],
                   handle: Callable[[str | None, bytes], Awaitable[None]],
                   runs: TextRuns | None = None) -> None:
    """Feed ``chunks`` (a response body) through a decoder into ``handle(event, data)``.

    Every read goes through ``run.read_chunk`` (an abort interrupts it; a read that gets
    nothing for the idle timeout ends the call as stalled) and the abort flag is checked
    after every event (or run of plain text events, with ``runs``), so an abort stops the
    mapping at once even inside one network read.
    """
    decoder = SSEDecoder()
    feed = decoder.feed
    next_chunk = chunks.__anext__
    texts = _Texts(runs) if runs is not None else None
    while True:
        try:
            chunk = await run.read_chunk(next_chunk)
        except StopAsyncIteration:
            break
        if texts is not None:
            await texts.read(run, decoder.complete(chunk), handle)
            continue
        for name, data in feed(chunk):
            await handle(name, data)
            if run.signal is not None and run.signal.aborted:
                run.check_aborted()
    for name, data in decoder.close():
        await handle(name, data)


#: Shapes learned in a row that then found no event: past this many, a stream's plain events
#: differ in more than their text (a per-event nonce, say) and no more are learned.
_MISSES = 3


class _Texts:
    """One stream's reads with ``runs``: each read's complete events, plain text events
    joined a run at a time (see the module docstring), the run at the start of a read found
    by the learned shape of the last plain event when there is one (``_text_shape``)."""

    __slots__ = ("runs", "shape", "misses")

    def __init__(self, runs: TextRuns) -> None:
        self.runs = runs
        self.shape: Shape | None = None
        self.misses = 0

    async def read(self, run: StreamRun, complete: bytes,
                   handle: Callable[[str | None, bytes], Awaitable[None]]) -> None:
        shape = self.shape
        key: Hashable = None
        pieces: list[str] = []
        if shape is not None and complete:
            found, end = shape.texts(complete)
            if end:
                self.misses = 0
                key, pieces = shape.key, [found.decode()]
                complete = complete[end:]
            else:
                self.misses += 1
                self.shape = None
        last, handled = await _apply_in_runs(run, SSEDecoder.events(complete), handle, self.runs, key, pieces)
        if handled:
            self.shape = None  # the provider's state changed: ``plain`` may answer otherwise
        if last is not None and self.shape is None and self.misses < _MISSES:
            self.shape = learn(self.runs.plain, *last)


async def _apply_in_runs(run: StreamRun, events: list[SSEEvent],
                         handle: Callable[[str | None, bytes], Awaitable[None]], runs: TextRuns,
                         key: Hashable = None, pieces: list[str] | None = None,
                         ) -> tuple[tuple[str | None, bytes, Hashable, str] | None, bool]:
    """One read's events: runs of plain text events joined (``runs.apply``), the rest to
    ``handle``, in order; the abort flag checked after each. ``pieces`` of block ``key``
    start the first run. Answers the last plain event after the last handled one, as
    ``(name, data, key, text)`` (or None), and whether any event went to ``handle``."""
    plain = runs.plain
    signal = run.signal
    pieces = pieces if pieces is not None else []
    last: tuple[str | None, bytes, Hashable, str] | None = None
    handled = False
    for name, data in events:
        found = plain(name, data)
        if found is not None:
            if pieces and found[0] != key:
                await runs.apply(key, "".join(pieces))
                pieces = []
                if signal is not None and signal.aborted:
                    run.check_aborted()
            key = found[0]
            pieces.append(found[1])
            last = (name, data, key, found[1])
            continue
        if pieces:
            await runs.apply(key, "".join(pieces))
            pieces = []
            if signal is not None and signal.aborted:
                run.check_aborted()
        await handle(name, data)
        last, handled = None, True
        if signal is not None and signal.aborted:
            run.check_aborted()
    if pieces:
        await runs.apply(key, "".join(pieces))
        if signal is not None and signal.aborted:
            run.check_aborted()
    return last, handled
