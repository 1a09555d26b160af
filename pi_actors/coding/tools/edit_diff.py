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
- :func:`apply_edits`: the replacements of one ``edit`` call, all or none (pi 0.73's
  ``applyEditsToNormalizedContent``).
- :func:`generate_diff_string`: pi's rendering of a line diff: ``+``/``-``/space, the line
  number right-aligned to the width of the larger line count, at most ``context`` lines of
  context around each change and `` <pad> ...`` where context was cut (between two changes:
  everything up to ``2 * context`` lines, else ``context`` on each side of the cut). The line diff itself
  is computed with :mod:`difflib` (no junk heuristic) over jsdiff's line tokens (each line
  keeps its ``\\n``), which gives jsdiff's result for the usual edit shapes; removals are
  listed before additions, as jsdiff does.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass

from .base import ToolError, js_length

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

        def show(lines: list[str]) -> None:
            nonlocal old_no, new_no
            for line in lines:
                out.append(f" {str(old_no).rjust(width)} {line}")
                old_no += 1
                new_no += 1

        def skip(count: int) -> None:
            nonlocal old_no, new_no
            if count > 0:
                out.append(f" {pad} ...")
                old_no += count
                new_no += count

        if last_was_change and next_is_change:
            # Between two changes (several edits in one call): all of it when short, else
            # ``context`` lines after the first change, ``...``, ``context`` before the next.
            if len(raw) <= context * 2:
                show(raw)
            else:
                show(raw[:context])
                skip(len(raw) - 2 * context)
                show(raw[len(raw) - context :])
        elif last_was_change:
            show(raw[:context])
            skip(len(raw) - len(raw[:context]))
        elif next_is_change:
            skipped = max(0, len(raw) - context)
            skip(skipped)
            show(raw[skipped:])
        else:
            old_no += len(raw)
            new_no += len(raw)
        last_was_change = False
    return "\n".join(out), first_changed


@dataclass(frozen=True)
class Replacement:
    """One entry of the ``edit`` tool's ``edits[]``: exact ``old_text`` → ``new_text``."""

    old_text: str
    new_text: str


def apply_edits(content: str, edits: list[Replacement], path: str) -> tuple[str, str]:
    """Apply ``edits`` to LF-normalized ``content`` at once; returns ``(base, updated)``.

    Every ``old_text`` is matched against the *original* content, never against the result
    of an earlier edit. If any edit needs the fuzzy match, all of them are matched in the
    fuzzy-normalized content (which becomes ``base``, as pi). Each must occur exactly once;
    two matches may not overlap. Nothing is applied unless every edit passes.

    Raises :class:`ToolError` with pi 0.73's texts: an empty ``old_text``, a text not found,
    one found several times, overlapping edits, or edits that change nothing. With a single
    edit the texts are the one-replacement wording (``Could not find the exact text in ...``);
    with several they name the entry (``edits[1]``).
    """
    edits = [Replacement(normalize_to_lf(e.old_text), normalize_to_lf(e.new_text)) for e in edits]
    single = len(edits) == 1
    for i, edit in enumerate(edits):
        if edit.old_text == "":
            raise ToolError(
                f"oldText must not be empty in {path}." if single else f"edits[{i}].oldText must not be empty in {path}."
            )
    fuzzy = any(fuzzy_find_text(content, e.old_text).used_fuzzy for e in edits)
    base = normalize_for_fuzzy_match(content) if fuzzy else content
    matched: list[tuple[int, int, int, str]] = []  # (index, length, edit number, new text)
    for i, edit in enumerate(edits):
        match = fuzzy_find_text(base, edit.old_text)
        if not match.found:
            raise ToolError(
                f"Could not find the exact text in {path}. The old text must match exactly including all "
                "whitespace and newlines."
                if single
                else f"Could not find edits[{i}] in {path}. The oldText must match exactly including all "
                "whitespace and newlines."
            )
        occurrences = count_occurrences(normalize_for_fuzzy_match(base), normalize_for_fuzzy_match(edit.old_text))
        if occurrences > 1:
            raise ToolError(
                f"Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide "
                "more context to make it unique."
                if single
                else f"Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be unique. "
                "Please provide more context to make it unique."
            )
        matched.append((match.index, match.length, i, edit.new_text))
    matched.sort(key=lambda m: m[0])
    for previous, current in zip(matched, matched[1:], strict=False):
        if previous[0] + previous[1] > current[0]:
            raise ToolError(
                f"edits[{previous[2]}] and edits[{current[2]}] overlap in {path}. Merge them into one edit or "
                "target disjoint regions."
            )
    updated = base
    for index, length, _, new_text in reversed(matched):
        updated = updated[:index] + new_text + updated[index + length :]
    if updated == base:
        raise ToolError(
            f"No changes made to {path}. The replacement produced identical content. This might indicate an "
            "issue with special characters or the text not existing as expected."
            if single
            else f"No changes made to {path}. The replacements produced identical content."
        )
    return base, updated
