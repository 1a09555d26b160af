"""A session as one self-contained HTML file (pi's ``/export`` and ``--export``).

The page shows the current branch (root → leaf) of the session: user and assistant messages,
thinking, tool calls with their arguments and results, bash executions, compaction and branch
summaries. Everything — styles included — is inside the one file; all text is escaped.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

from .session.context import session_context

__all__ = ["export_html", "render_html"]

_STYLE = """
body{font:14px/1.5 system-ui,sans-serif;max-width:900px;margin:2em auto;padding:0 1em;color:#222;background:#fafafa}
h1{font-size:1.3em}.meta{color:#666;font-size:.9em}
.msg{margin:1em 0;padding:.6em .9em;border-radius:6px;background:#fff;border:1px solid #ddd}
.user{border-left:4px solid #3b82f6}.assistant{border-left:4px solid #10b981}
.tool{border-left:4px solid #f59e0b}.error{border-left:4px solid #ef4444}.summary{border-left:4px solid #8b5cf6}
.role{font-weight:600;font-size:.8em;text-transform:uppercase;color:#555}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f4f6;padding:.5em;border-radius:4px}
.thinking{color:#777;font-style:italic}
"""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(f"[image {block.get('mimeType', '')}]")
    return "\n".join(parts)


def _block(css: str, role: str, body: str) -> str:
    return f'<div class="msg {css}"><div class="role">{html.escape(role)}</div>{body}</div>'


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def _message_html(m: dict) -> str:
    role = m.get("role")
    if role == "user":
        return _block("user", "user", _pre(_text(m.get("content"))))
    if role == "assistant":
        body = []
        for block in m.get("content") or []:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                body.append(_pre(block["text"]))
            elif kind == "thinking" and block.get("thinking"):
                body.append(f'<div class="thinking">{_pre(block["thinking"])}</div>')
            elif kind == "toolCall":
                args = json.dumps(block.get("arguments"), ensure_ascii=False, indent=2)
                body.append(f"<div>→ <b>{html.escape(block.get('name', ''))}</b></div>{_pre(args)}")
        if m.get("errorMessage"):
            body.append(_pre(f"{m.get('stopReason')}: {m['errorMessage']}"))
        css = "error" if m.get("stopReason") in ("error", "aborted") else "assistant"
        return _block(css, f"assistant · {m.get('provider', '')}/{m.get('model', '')}", "".join(body))
    if role == "toolResult":
        css = "error" if m.get("isError") else "tool"
        return _block(css, f"tool result · {m.get('toolName', '')}", _pre(_text(m.get("content"))))
    if role == "bashExecution":
        return _block("tool", "bash", _pre(f"$ {m.get('command', '')}\n{m.get('output', '')}"))
    if role in ("compactionSummary", "branchSummary"):
        return _block("summary", role, _pre(m.get("summary", "")))
    if role == "custom":
        return _block("user", f"custom · {m.get('customType', '')}", _pre(_text(m.get("content"))))
    return ""


def render_html(header: dict, entries: list[dict], leaf_id: Any = None) -> str:
    """The HTML page for the branch ending at ``leaf_id`` (default: the last entry)."""
    ctx = session_context(entries, leaf_id) if leaf_id is not None else session_context(entries)
    name = next((e.get("name") for e in reversed(entries) if e.get("type") == "session_info" and e.get("name")), None)
    title = name or f"Session {header.get('id', '')}"
    body = "\n".join(_message_html(m) for m in ctx.messages)
    meta = f"{html.escape(header.get('cwd', ''))} · {html.escape(header.get('timestamp', ''))} · {len(ctx.messages)} messages"
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1><div class=\"meta\">{meta}</div>\n{body}\n</body></html>\n"
    )


def export_html(header: dict, entries: list[dict], path: str, leaf_id: Any = None) -> str:
    """Write the page to ``path`` (parents created); returns the absolute path."""
    path = os.path.abspath(os.path.expanduser(path))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(header, entries, leaf_id))
    return path
