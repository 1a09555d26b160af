"""Strip lone UTF-16 surrogates from outgoing text (pi's packages/ai, docs/architecture.md §7).

Python strings hold code points, so a surrogate code point (U+D800–U+DFFF) is never a proper
character: it comes from ``surrogateescape`` decoding, JSON ``\\ud83d`` escapes and the like.
``sanitize_surrogates(s)`` removes every lone one and, as pi keeps correctly paired surrogates,
joins a high half directly followed by a low half into the character they encode. Everything
else (emoji, CJK, ...) is untouched. Providers apply it to all outgoing text.
"""

from __future__ import annotations

import re

__all__ = ["sanitize_surrogates"]

_SURROGATES = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def _fix(match: re.Match[str]) -> str:
    s = match.group()
    if len(s) == 2:
        return chr(0x10000 + ((ord(s[0]) - 0xD800) << 10) + (ord(s[1]) - 0xDC00))
    return ""


def sanitize_surrogates(text: str) -> str:
    try:
        text.encode("utf-8")  # fast path: no surrogate code points at all
        return text
    except UnicodeEncodeError:
        return _SURROGATES.sub(_fix, text)
