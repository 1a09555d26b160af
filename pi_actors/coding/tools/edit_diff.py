"""Text matching and the numbered diff of the ``edit`` tool (pi spec §1.6, ``edit-diff.ts``).

- :func:`normalize_to_lf`, :func:`restore_line_endings`, :func:`detect_line_ending`,
  :func:`strip_bom`: line-ending and BOM handling.
- :func:`normalize_for_fuzzy_match`: NFKC, trailing whitespace stripped from every line,
  smart quotes, Unicode dashes and exotic spaces turned into their ASCII forms.
- :func:`fuzzy_find_text`: exact ``find`` first; otherwise the same search in the normalized
  texts, in which case the returned base content is the *normalized* file (pi's behaviour:
  a fuzzy edit rewrites the whole file in normalized form).
- :func:`count_occurrences`: non-overlapping occurrences, with JavaScript's ``split("")``
  semantics for an empty needle.
- :func:`generate_diff_string`: pi's rendering of a line diff: ``+``/``-``/space, the line
  number right-aligned to the width of the larger line count, at most ``context`` lines of
  context around each change and `` <pad> ...`` where context was cut. The line diff itself
  is computed with :mod:`difflib` (no junk heuristic) over jsdiff's line tokens (each line
  keeps its ``\\n``), which gives jsdiff's result for the usual edit shapes; removals are
  listed before additions, as jsdiff does.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass

from .base import js_length

_SINGLE_QUOTES = re.compile("[\u2018\u2019\u201a\u201b]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d\u201e\u201f]")
_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2015\u2212]")
_SPACES = re.compile("[\u00a0\u2002-\u200a\u202f\u205f\u3000]")
_LINE_TOKENS = re.compile(r"(\n|\r\n)")


def detect_line_ending(content: str) -> str:
    """``"\\r\\n"`` if the first line break is CRLF, else ``"\\n"``."""
    lf = content.find("\n")
    if lf == -1:
        return "\n"
    return "\r\n" if lf > 0 and content[lf - 1] == "\r" else "\n"


def normalize_to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def restore_line_endings(text: str, ending: str) -> str:
    return text.replace("\n", "\r\n") if ending == "\r\n" else text


def strip_bom(content: str) -> tuple[str, str]:
    """``(bom, text)``: the leading U+FEFF (or "") and the rest."""
    if content.startswith("\ufeff"):
        return "\ufeff", content[1:]
    return "", content


def normalize_for_fuzzy_match(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _SINGLE_QUOTES.sub("'", text)
    text = _DOUBLE_QUOTES.sub('"', text)
    text = _DASHES.sub("-", text)
    return _SPACES.sub(" ", text)


@dataclass(frozen=True)
class Match:
    found: bool
    index: int
    length: int
    used_fuzzy: bool
    base: str


def fuzzy_find_text(content: str, old_text: str) -> Match:
    index = content.find(old_text)
    if index != -1:
        return Match(True, index, len(old_text), False, content)
    fuzzy_content = normalize_for_fuzzy_match(content)
    fuzzy_old = normalize_for_fuzzy_match(old_text)
    index = fuzzy_content.find(fuzzy_old)
    if index == -1:
        return Match(False, -1, 0, False, content)
    return Match(True, index, len(fuzzy_old), True, fuzzy_content)


def count_occurrences(haystack: str, needle: str) -> int:
    """``haystack.split(needle).length - 1`` as JavaScript computes it."""
    if needle == "":
        return js_length(haystack) - 1
    return haystack.count(needle)


def _tokens(text: str) -> list[str]:
    pieces = _LINE_TOKENS.split(text)
    if pieces and pieces[-1] == "":
        pieces.pop()
    tokens: list[str] = []
    for i, piece in enumerate(pieces):
        if i % 2:
            tokens[-1] += piece
        else:
            tokens.append(piece)
    return tokens


def _parts(old: str, new: str) -> list[tuple[str, list[str]]]:
    """jsdiff-like parts: ``("equal"|"removed"|"added", tokens)``, adjacent kinds merged."""
    a, b = _tokens(old), _tokens(new)
    parts: list[tuple[str, list[str]]] = []

    def push(kind: str, tokens: list[str]) -> None:
        if not tokens:
            return
        if parts and parts[-1][0] == kind:
            parts[-1][1].extend(tokens)
        else:
            parts.append((kind, list(tokens)))

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            push("equal", a[i1:i2])
        else:
            push("removed", a[i1:i2])
            push("added", b[j1:j2])
    # Keep jsdiff's order inside a change run: every removal before the additions.
    ordered: list[tuple[str, list[str]]] = []
    for kind, tokens in parts:
        if kind == "removed" and ordered and ordered[-1][0] == "added":
            added = ordered.pop()
            if ordered and ordered[-1][0] == "removed":
                ordered[-1][1].extend(tokens)
            else:
                ordered.append((kind, tokens))
            ordered.append(added)
        else:
            ordered.append((kind, tokens))
    return ordered


def generate_diff_string(old: str, new: str, context: int = 4) -> tuple[str, int | None]:
    """``(diff, first_changed_line)``; see the module docstring for the format."""
    parts = _parts(old, new)
    width = len(str(max(len(old.split("\n")), len(new.split("\n")))))
    pad = " " * width
    out: list[str] = []
    old_no = new_no = 1
    last_was_change = False
    first_changed: int | None = None

    for i, (kind, tokens) in enumerate(parts):
        raw = "".join(tokens).split("\n")
        if raw and raw[-1] == "":
            raw.pop()
        if kind != "equal":
            if first_changed is None:
                first_changed = new_no
            for line in raw:
                if kind == "added":
                    out.append(f"+{str(new_no).rjust(width)} {line}")
                    new_no += 1
                else:
                    out.append(f"-{str(old_no).rjust(width)} {line}")
                    old_no += 1
            last_was_change = True
            continue
        next_is_change = i < len(parts) - 1 and parts[i + 1][0] != "equal"
        if last_was_change or next_is_change:
            shown = raw
            skip_start = skip_end = 0
            if not last_was_change:
                skip_start = max(0, len(raw) - context)
                shown = raw[skip_start:]
            if not next_is_change and len(shown) > context:
                skip_end = len(shown) - context
                shown = shown[:context]
            if skip_start > 0:
                out.append(f" {pad} ...")
                old_no += skip_start
                new_no += skip_start
            for line in shown:
                out.append(f" {str(old_no).rjust(width)} {line}")
                old_no += 1
                new_no += 1
            if skip_end > 0:
                out.append(f" {pad} ...")
                old_no += skip_end
                new_no += skip_end
        else:
            old_no += len(raw)
            new_no += len(raw)
        last_was_change = False
    return "\n".join(out), first_changed
