"""The front matter of a Markdown resource (skill, prompt template): a ``---`` fenced block of
``key: value`` lines at the top of the file.

Only the YAML that such files use is understood: plain, single- and double-quoted scalars,
``true``/``false``, block scalars (``|``, ``>``, with ``-``/``+``), and plain scalars that
continue on more-indented lines. Anything else is kept as text. Parsing never raises: a file
without a closed block has no front matter and its whole text is the body.
"""

from __future__ import annotations

__all__ = ["parse_frontmatter"]


def _scalar(raw: str) -> str | bool:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        return inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"').replace("\\\\", "\\")
    if value in ("true", "True"):
        return True
    if value in ("false", "False"):
        return False
    if " #" in value:
        value = value.split(" #", 1)[0].rstrip()
    return value


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def parse_frontmatter(text: str) -> tuple[dict[str, str | bool], str]:
    """``(fields, body)`` of ``text``. ``fields`` maps each top-level key to a string (or a
    bool for ``true``/``false``); ``body`` is the text after the closing ``---`` (leading
    newlines removed). Without front matter: ``({}, text)``."""
    normalized = text.replace("\r\n", "\n")
    if not normalized.startswith("---\n"):
        return {}, text
    end = normalized.find("\n---", 3)
    while end >= 0 and normalized[end + 4 : end + 5] not in ("", "\n"):
        end = normalized.find("\n---", end + 4)
    if end < 0:
        return {}, text
    lines = normalized[4:end].split("\n")
    body = normalized[end + 4 :].lstrip("\n")
    fields: dict[str, str | bool] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#") or _indent(line) > 0 or ":" not in line:
            continue
        key, _, rest = line.partition(":")
        key, rest = key.strip(), rest.strip()
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > 0):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        if rest[:1] in ("|", ">") and rest.rstrip("-+0123456789") in ("|", ">"):
            width = min((_indent(b) for b in block if b.strip()), default=0)
            kept = [b[width:] for b in block]
            if rest[0] == "|":
                fields[key] = "\n".join(kept)
            else:
                fields[key] = " ".join(k.strip() for k in kept if k.strip())
        elif block:
            fields[key] = " ".join([rest, *(b.strip() for b in block if b.strip())]).strip()
        else:
            fields[key] = _scalar(rest)
    return fields, body
