"""Assistant text rendered as pi's TUI renders Markdown, on top of rich's ``Markdown``.

Three differences from rich's defaults, each matching pi 0.73.1's markdown component:

* a single line break inside a paragraph stays a line break (pi's renderer keeps the
  newlines of a paragraph's text; CommonMark would join the lines with a space);
* a link shows its target after its text, ``text (url)`` — unless the text is the target
  itself (an autolink), which is shown once;
* a table is drawn boxed (``┌─┬─┐``), with a rule between rows, as pi draws it.

``PiMarkdown(text)`` is a rich renderable; it never raises on any input text (the parser
accepts every string).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from markdown_it.token import Token
from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown, MarkdownElement, TableElement
from rich.table import Table

__all__ = ["PiMarkdown"]


class _BoxedTable(TableElement):
    """A Markdown table in a square box with lines between the rows (pi's table)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = Table(box=box.SQUARE, show_lines=True, style="markdown.table.border", border_style="markdown.table.border")
        if self.header is not None and self.header.row is not None:
            for column in self.header.row.cells:
                heading = column.content.copy()
                heading.stylize("markdown.table.header")
                table.add_column(heading)
        if self.body is not None:
            for row in self.body.rows:
                table.add_row(*[cell.content for cell in row.cells])
        yield table


class PiMarkdown(Markdown):
    """rich's Markdown with pi's line breaks, link targets and boxed tables.

    ``markup``: the Markdown text; ``code_theme``: the pygments theme of code blocks."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {**Markdown.elements, "table_open": _BoxedTable}

    def __init__(self, markup: str, code_theme: str = "monokai", **kwargs: Any) -> None:
        # hyperlinks=False: rich then prints a link as "text (url)"; OSC 8 links show no url.
        super().__init__(markup, code_theme=code_theme, hyperlinks=False, **kwargs)
        _as_pi_inlines(self.parsed)


def _as_pi_inlines(tokens: Iterable[Token]) -> None:
    """Rewrite the inline tokens in place: soft breaks become hard breaks, and a link whose
    text is its own target loses its link tokens (shown once, as plain text)."""
    for token in tokens:
        children = token.children
        if not children:
            continue
        kept: list[Token] = []
        i = 0
        while i < len(children):
            child = children[i]
            if child.type == "softbreak":
                child.type = "hardbreak"
            if child.type == "link_open" and _is_autolink(child, children[i + 1 : i + 3]):
                kept.append(children[i + 1])
                i += 3
                continue
            kept.append(child)
            i += 1
        token.children = kept
        _as_pi_inlines(kept)


def _is_autolink(link_open: Token, following: list[Token]) -> bool:
    """Whether ``link_open`` is followed by exactly its target as text and the link's end."""
    if len(following) < 2 or following[0].type != "text" or following[1].type != "link_close":
        return False
    href = str(link_open.attrs.get("href", ""))
    text = following[0].content
    return text == href or (href.startswith("mailto:") and text == href[len("mailto:") :])
