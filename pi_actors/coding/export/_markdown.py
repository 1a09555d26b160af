"""Markdown → safe HTML for the exported page, rendered at export time in Python.

The parser is markdown-it-py (the CommonMark parser the terminal UI already uses through
``rich.markdown``), configured for untrusted text:

- raw HTML in the source is never passed through: ``<b>`` arrives as ``&lt;b&gt;``;
- links keep only ``http:``, ``https:`` and ``mailto:`` targets; any other target (``javascript:``,
  ``data:``, relative paths, ...) leaves the link text as plain text;
- images are not rendered as images (the page loads nothing from anywhere): ``![alt](url)``
  stays literal text;
- links open in a new tab without referrer or opener.

GitHub's tables and strikethrough are on; the rest is plain CommonMark.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["markdown_html", "safe_link"]

_SCHEMES = ("http:", "https:", "mailto:")


def safe_link(url: str) -> bool:
    """Whether ``url`` may be a link target on the page: http(s) or mailto, nothing else."""
    return url.strip().lower().startswith(_SCHEMES)


def _link_open(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    if not safe_link(str(token.attrGet("href") or "")):
        # markdown-it keeps the link of an empty destination (``[a]()``): no target at all then.
        token.attrs.pop("href", None)
    token.attrSet("rel", "noopener noreferrer nofollow")
    token.attrSet("target", "_blank")
    return str(renderer.renderToken(tokens, idx, options, env))


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable(["image", "html_block", "html_inline"])
    md.validateLink = safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    return md


def markdown_html(text: str) -> str:
    """``text`` (Markdown, untrusted) as an HTML fragment; never raises for any string."""
    return _parser().render(text)
