"""What a finished item of the transcript prints as: pure functions from a message (a dict
as the coordinator sends it) and the display switches to rich renderables.

The TUI keeps every printed item as a closure over one of these, so that Ctrl+O (tool output)
and Ctrl+T (thinking) reprint what is on screen with the new switches: they read no state
but their arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text

from ._markdown import PiMarkdown
from .widgets import _text_of, _tool_label

__all__ = ["assistant_parts", "bash_parts", "tool_parts", "written_parts"]


def assistant_parts(m: Mapping[str, Any], show_thinking: bool) -> list[Any]:
    """Thinking (dimmed, or ``Thinking...`` when hidden), text as Markdown (pi's line
    breaks, link targets and boxed tables), and how the message ended if not normally."""
    content = m.get("content") or []
    parts: list[Any] = []
    for b in content:
        if b.get("type") == "thinking" and b.get("thinking", "").strip():
            parts.append(Text(b["thinking"].strip() if show_thinking else "Thinking...", style="theme.thinking"))
        elif b.get("type") == "text" and b.get("text", "").strip():
            parts.append(PiMarkdown(b["text"], code_theme="monokai"))
    if m.get("stopReason") == "aborted":
        parts.append(Text("Operation aborted", style="theme.error"))
    elif m.get("stopReason") == "error":
        parts.append(Text(f"Error: {m.get('errorMessage') or 'unknown error'}", style="theme.error"))
    return parts


def tool_parts(name: str, args: dict | None, result: Mapping[str, Any], is_error: bool, took: float | None, *,
               expanded: bool, show_images: bool) -> list[Any]:
    """A finished tool call: its label, then the edit's diff, the written content (``write``)
    or the result's text (its first or, for bash, last lines unless ``expanded``), its images
    (inline when ``show_images`` and the terminal draws them), and bash's ``Took 1.2s``."""
    head = Text.assemble(("● ", "theme.error" if is_error else "theme.success"), (_tool_label(name, args) if args is not None else name, "bold"))
    details = result.get("details") or {}
    body = _text_of(result.get("content")).rstrip("\n")
    parts: list[Any] = [head]
    written = (args or {}).get("content")
    if name == "edit" and isinstance(details.get("diff"), str) and not is_error:
        diff = Text()
        for line in details["diff"].splitlines():
            style = "theme.success" if line.startswith("+") else "theme.error" if line.startswith("-") else "theme.dim"
            diff.append("  " + line + "\n", style=style)
        parts.append(diff)
    elif name == "write" and isinstance(written, str) and not is_error:
        parts += written_parts(str((args or {}).get("path") or ""), written, expanded)
    elif body:
        lines = body.splitlines()
        limit = {"bash": 5, "grep": 15, "ls": 20, "find": 20}.get(name, 10)
        if not expanded and len(lines) > limit:
            hidden = len(lines) - limit
            lines = lines[-limit:] if name == "bash" else lines[:limit]
            # pi's wording: a bash preview shows the last lines ("earlier lines" hidden).
            note = f"  ... ({hidden} earlier lines, ctrl+o to expand)" if name == "bash" else f"  ... ({hidden} more lines, ctrl+o to expand)"
            lines = [note, *lines] if name == "bash" else [*lines, note]
        parts.append(Text("\n".join("  " + ln for ln in lines), style="theme.error" if is_error else "theme.tooloutput"))
    images = [b for b in result.get("content") or [] if isinstance(b, dict) and b.get("type") == "image"]
    if images:
        from .terminal_images import image_protocol, image_renderables

        parts += image_renderables(images, show_images, image_protocol())
    if name == "bash" and took is not None:
        parts.append(Text(f"  Took {took:.1f}s", style="theme.dim"))
    return parts


def written_parts(path: str, content: str, expanded: bool) -> list[Any]:
    """The content a ``write`` call wrote, highlighted by the file's type: its first 10
    lines and ``... (N more lines, T total, ctrl+o to expand)`` unless expanded (pi's)."""
    lines = content.replace("\t", "   ").split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    shown = lines if expanded else lines[:10]
    lexer = Syntax.guess_lexer(path, "\n".join(shown)) if path else "text"
    parts: list[Any] = [Padding(Syntax("\n".join(shown), lexer, theme="monokai", background_color="default", word_wrap=True), (0, 0, 0, 2))]
    if len(shown) < len(lines):
        parts.append(Text(f"  ... ({len(lines) - len(shown)} more lines, {len(lines)} total, ctrl+o to expand)", style="theme.dim"))
    return parts


def bash_parts(command: str, result: Mapping[str, Any], exclude: bool, expanded: bool) -> list[Any]:
    """A ``!command``'s output (its last 20 lines and pi's ``... N more lines (ctrl+o to
    expand)`` unless expanded) and how it ended."""
    out = (result.get("output") or "").rstrip("\n")
    lines = out.splitlines()
    hidden = 0 if expanded else max(0, len(lines) - 20)
    parts: list[Any] = [Text.assemble(("$ ", "theme.bashmode"), (command, "bold"), ("  (not in context)" if exclude else "", "theme.dim"))]
    if lines:
        parts.append(Text("\n".join("  " + ln for ln in lines[hidden:]), style="theme.tooloutput"))
    if hidden:
        parts.append(Text(f"  ... {hidden} more lines (ctrl+o to expand)", style="theme.dim"))
    if result.get("cancelled"):
        parts.append(Text("  (cancelled)", style="theme.error"))
    elif result.get("exitCode") not in (0, None):
        parts.append(Text(f"  exit code {result.get('exitCode')}", style="theme.error"))
    return parts
