"""The shape of a provider's plain text delta events, to find a run of them without decoding each.

A long reply is tens of thousands of events whose bytes differ only in the text they carry:
``data: {"id":"x","choices":[{"index":0,"delta":{"content":"TEXT"}}]}``. Once one such event
has been decoded and found plain (``TextRuns.plain``, see ``_sse``), the rest of its bytes
(the *prefix* before the text's string literal, the *suffix* after it) make a regular
expression that matches exactly the events that differ from it only in that literal's
contents; the texts of a whole run of them come out of one regex scan and one UTF-8 decode,
with no JSON decoding and no Python work per event.

Why that is the same as decoding each event (the proof the code keeps):

- The literal's contents may hold only bytes that stand for themselves inside a JSON string:
  no ``"``, no ``\\``, no control character (which JSON forbids raw), and only whole, valid
  UTF-8 sequences with no surrogate (:data:`TEXT`). Putting any such bytes between the
  prefix and the suffix leaves every other token of the event as it was, and the string's
  value is those bytes decoded; so the event decodes as the learned one with only that
  string's value changed.
- :func:`learn` checks that the string is the one ``plain`` returns as the text: it puts a
  probe text in its place and asks ``plain`` again, which must answer the same key and the
  probe (a literal found at the wrong place — another field with the same value, a
  duplicate key that the decoder overrides — gives something else, and no shape is
  learned). ``plain`` does not look at the text's value, so every text gives that key.
- ``plain``'s answer also depends on the provider's state (which block is open), which only
  its full handler changes: a shape is good until the next event that goes to the handler
  (``_sse.read_sse`` drops it then).
- The pattern matches whole events only (``event:`` line as the decoder read it, one
  ``data:`` line, the blank line that dispatches it), so a run found here is the decoder's
  own run of events; any byte that differs ends it, and the rest of the read takes the
  ordinary path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from operator import itemgetter

__all__ = ["TEXT", "Shape", "learn"]

#: The contents of a JSON string literal whose bytes are its value's UTF-8: printable ASCII
#: but ``"`` and ``\\``, and whole UTF-8 sequences of 2 to 4 bytes (no overlong form, no
#: surrogate, nothing past U+10FFFF). Possessive: a match is never re-tried shorter.
TEXT = (rb'(?:[\x20\x21\x23-\x5b\x5d-\x7f]++|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]'
        rb'|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}'
        rb'|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})*+')
_TEXT = re.compile(TEXT)

#: Put in the learned literal's place to check that it is the text (:func:`learn`).
_PROBE = "pi-actors shape probe \u00e9"


#: Texts joined by NUL (which no text of :data:`TEXT` holds): the longest run of whole texts.
_TEXTS = re.compile(TEXT + rb"(?:\x00" + TEXT + rb")*+")
#: Printable ASCII but ``"`` and ``\\``: a quick first look at many texts at once.
_ASCII = re.compile(rb'[\x20\x21\x23-\x5b\x5d-\x7f]*+')
#: The longest needle the read is split at (``bytes.split`` costs about the needle's length
#: per match when matches are dense, as here).
_NEEDLE = 16


class Shape:
    """A learned shape: events ``head + TEXT + tail`` (``head`` ends with the literal's
    opening quote, ``tail`` starts with its closing one); ``key`` is the block ``plain``
    named for them.

    :meth:`texts` finds a run of them with a few passes of C over the read and a slice per
    event: between two such events lie exactly the bytes ``joint`` (``tail``, the blank line,
    ``head``). The read is split at the end of ``joint`` (the ``needle``); each piece before
    the last that ends with the rest of ``joint`` (``rest``) is one event's text then
    ``rest``, and is taken if the text is a :data:`TEXT` (no quote: so the split found the
    event's own closing quote); the last piece holds the last event's text up to its closing
    quote, then ``tail`` and the blank line (or the end)."""

    __slots__ = ("key", "head", "tail", "joint", "needle", "rest", "text_of", "at_end")

    def __init__(self, key: Hashable, head: bytes, tail: bytes) -> None:
        self.key = key
        self.head, self.tail = head, tail
        self.joint = tail + b"\n\n" + head
        cut = len(self.joint) - min(_NEEDLE, len(head))
        self.rest, self.needle = self.joint[:cut], self.joint[cut:]
        self.text_of = itemgetter(slice(None, -len(self.rest)))  # a piece's text: all but ``rest``
        self.at_end = head.find(self.needle) == len(head) - len(self.needle)

    def texts(self, complete: bytes) -> tuple[bytes, int]:
        """The joined text bytes of the run of such events at the start of ``complete``
        (whole events separated by blank lines, the last one's blank line cut off: see
        ``SSEDecoder.complete``), and where the run ends (past its last blank line, or at
        the end of ``complete``): 0 for no run."""
        head, joint, rest = self.head, self.joint, self.rest
        if not complete.startswith(head):
            return b"", 0
        pieces = complete.split(self.needle) if self.at_end else []
        if pieces and len(pieces[0]) == len(head) - len(self.needle):
            del pieces[0]  # the first needle was the one that ends ``head``: no copy of the read
        else:  # (or it was found earlier, across the end of ``head``)
            pieces = complete[len(head):].split(self.needle)
        pieces.pop()  # the last event's text, its tail and whatever follows (looked at below)
        texts = list(map(self.text_of, pieces))
        whole = len(texts)
        if not complete.startswith(joint.join(texts) + joint if texts else b"", len(head)):
            whole = 0  # some piece is not ``text + rest``: the run ends before the first one
            while whole < len(pieces) and pieces[whole].endswith(rest):
                whole += 1
            del texts[whole:]
        joined = b"".join(texts)
        if _ASCII.fullmatch(joined) is None:  # not all plain ASCII: look closer
            nul = b"\x00".join(texts)
            if nul.count(b"\x00") != whole - 1:
                return b"", 0  # a NUL in a piece: not a text (and rare enough not to look for it)
            valid = _TEXTS.match(nul).end()  # type: ignore[union-attr]  # ``*`` always matches
            if valid < len(nul):  # a piece that is not a text: the run ends before it
                whole = nul.count(b"\x00", 0, valid)
                del texts[whole:]
                joined = b"".join(texts)
                return joined, len(joined) + whole * len(joint)  # (the next event is that one)
        # The run so far is ``head``, then per event its text and ``joint`` (which ends with
        # the next event's ``head``): the next event's text starts at ``start``. It is the
        # read's last event, or one whose piece did not end with ``rest``: look at it alone.
        end = len(joined) + whole * len(joint)  # past the run's last blank line
        start = end + len(head)
        quote = complete.find(b'"', start)
        if quote >= 0 and complete.startswith(self.tail, quote) and _TEXT.fullmatch(complete, start, quote) is not None:
            after = quote + len(self.tail)
            if after == len(complete):
                return joined + complete[start:quote], after
            if complete.startswith(b"\n\n", after):
                return joined + complete[start:quote], after + 2
        return joined, end


def learn(plain: Callable[[str | None, bytes], tuple[Hashable, str] | None],
          name: str | None, data: bytes, key: Hashable, text: str) -> Shape | None:
    """The shape of the event ``(name, data)``, for which ``plain`` answered ``(key, text)``;
    None when it has none (data on several lines, a text that needs escapes, a literal that
    could not be placed for sure)."""
    if b"\n" in data or text == _PROBE:
        return None
    try:
        raw = text.encode()
    except UnicodeEncodeError:  # a lone surrogate (from a \\u escape)
        return None
    if _TEXT.fullmatch(raw) is None:
        return None
    at = data.rfind(b'"' + raw + b'"')
    if at < 0:
        return None
    prefix, suffix = data[:at + 1], data[at + 1 + len(raw):]
    if plain(name, prefix + _PROBE.encode() + suffix) != (key, _PROBE):
        return None
    head = b"data: " + prefix
    if name is not None:
        try:
            head = b"event: " + name.encode() + b"\n" + head
        except UnicodeEncodeError:
            return None
    return Shape(key, head, suffix)
