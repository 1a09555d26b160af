"""One session entry as an HTML block of the exported page.

Every string that came from the model, a tool, the user or the session file is untrusted: it
is either rendered through :func:`markdown_html` (which escapes raw HTML and keeps only
http(s)/mailto links) or escaped with :func:`html.escape`. Images become ``data:`` URLs only
for the four raster types browsers show and only when the payload is plain base64.

Tool calls are shown with their results (found by ``toolCallId`` among the entries): ``bash``
as the command and its output, ``read``/``write`` with the path (``write`` shows the content
written), ``edit`` as the coloured line diff the tool returned (or old/new text when there is
no result), anything else as its JSON arguments. Long outputs show their first lines and fold
the rest in a ``<details>``; thinking is a collapsed ``<details class="thinking">``.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from ._markdown import markdown_html

__all__ = ["as_dict", "as_list", "entry_html", "text_of"]

_PREVIEW_LINES = 12
_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


def as_list(value: Any) -> list:
    """``value`` if it is a list, else an empty list (session files are untrusted)."""
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict:
    """``value`` if it is a dict, else an empty dict."""
    return value if isinstance(value, dict) else {}


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else str(value))


def text_of(content: Any) -> str:
    """The text parts of a message ``content`` (a string or a list of parts), joined."""
    if isinstance(content, str):
        return content
    parts = []
    for block in as_list(content):
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def _images(content: Any) -> str:
    out = []
    for block in as_list(content):
        if not (isinstance(block, dict) and block.get("type") == "image"):
            continue
        mime, data = block.get("mimeType"), block.get("data")
        if mime in _IMAGE_TYPES and isinstance(data, str) and _BASE64.fullmatch(data):
            out.append(f'<img class="message-image" alt="image" src="data:{mime};base64,{"".join(data.split())}">')
        else:
            out.append(f'<div class="muted">[image {_e(mime or "")}]</div>')
    return "".join(out)


def _output(text: str, css: str = "tool-output") -> str:
    """``text`` in a ``<pre>``; past the preview lines the rest folds into a ``<details>``."""
    lines = text.split("\n")
    if len(lines) <= _PREVIEW_LINES + 3:
        return f'<pre class="{css}">{_e(text)}</pre>'
    head, rest = "\n".join(lines[:_PREVIEW_LINES]), "\n".join(lines[_PREVIEW_LINES:])
    return (
        f'<pre class="{css}">{_e(head)}</pre><details class="more"><summary>… {len(lines) - _PREVIEW_LINES} more lines</summary>'
        f'<pre class="{css}">{_e(rest)}</pre></details>'
    )


def _diff_html(diff: str) -> str:
    """pi's numbered diff (``+``/``-``/space, line number, text) with one element per line."""
    rows = []
    for line in diff.split("\n"):
        css = "diff-add" if line.startswith("+") else "diff-del" if line.startswith("-") else "diff-ctx"
        rows.append(f'<div class="{css}">{_e(line) or " "}</div>')
    return f'<div class="tool-diff">{"".join(rows)}</div>'


def _args_diff(args: dict) -> str:
    edits = as_list(args.get("edits")) or [args]
    lines: list[str] = []
    for edit in edits:
        if isinstance(edit, dict):
            lines += [f"-{line}" for line in str(edit.get("oldText", "")).split("\n")]
            lines += [f"+{line}" for line in str(edit.get("newText", "")).split("\n")]
    return _diff_html("\n".join(lines))


def _tool_header(name: str, args: dict) -> str:
    path = args.get("path") or args.get("file_path")
    if name == "bash":
        return f'<div class="tool-header"><span class="tool-command">$ {_e(args.get("command", ""))}</span></div>'
    if isinstance(path, str):
        where = path
        if name == "read" and (args.get("offset") or args.get("limit")):
            start = int(args.get("offset") or 1) if str(args.get("offset") or 1).isdigit() else 1
            where += f":{start}" + (f"-{start + int(args['limit']) - 1}" if str(args.get("limit", "")).isdigit() else "")
        return f'<div class="tool-header"><span class="tool-name">{_e(name)}</span> <span class="tool-path">{_e(where)}</span></div>'
    return f'<div class="tool-header"><span class="tool-name">{_e(name)}</span></div>'


def _tool_call(call: dict, result: dict | None) -> str:
    name = str(call.get("name", ""))
    args = as_dict(call.get("arguments"))
    body = [_tool_header(name, args)]
    if name not in ("bash", "read", "write", "edit", "ls", "find", "grep") or (name in ("ls", "find", "grep") and len(args) > 1):
        body.append(f'<pre class="tool-args">{_e(json.dumps(args, ensure_ascii=False, indent=2))}</pre>')
    if name == "write" and isinstance(args.get("content"), str):
        body.append(_output(args["content"], "tool-content"))
    error = bool(result and result.get("isError"))
    details = as_dict(result.get("details")) if result else {}
    if name == "edit" and not error:
        diff = details.get("diff")
        body.append(_diff_html(diff) if isinstance(diff, str) and diff else _args_diff(args))
    if result is None:
        body.append('<div class="muted">(no result)</div>')
    elif not (name == "edit" and not error) and not (name == "write" and not error):
        text = text_of(result.get("content"))
        body.append(_output(text, "tool-output tool-error" if error else "tool-output") + _images(result.get("content")))
    css = "tool-call error" if error else "tool-call"
    return f'<div class="{css}" data-tool="{_e(name)}">{"".join(body)}</div>'


def _assistant(message: dict, results: dict[str, dict]) -> str:
    body = []
    for block in as_list(message.get("content")):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            body.append(f'<div class="markdown">{markdown_html(block["text"])}</div>')
        elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
            body.append(
                '<details class="thinking"><summary>Thinking</summary>'
                f'<div class="thinking-text markdown">{markdown_html(block["thinking"])}</div></details>'
            )
        elif kind == "toolCall":
            body.append(_tool_call(block, results.get(str(block.get("id")))))
    if message.get("errorMessage") or message.get("stopReason") in ("error", "aborted"):
        reason = message.get("stopReason") or "error"
        body.append(f'<div class="error-text">{_e(reason)}: {_e(message.get("errorMessage") or "")}</div>')
    model = f"{message.get('provider', '')}/{message.get('model', '')}".strip("/")
    return _section("assistant", f"Assistant <span class=\"muted\">{_e(model)}</span>", "".join(body))


def _section(css: str, role_html: str, body: str) -> str:
    return f'<div class="message {css}"><div class="role">{role_html}</div>{body}</div>'


def _message(message: dict, results: dict[str, dict]) -> str:
    role = message.get("role")
    if role == "user":
        content = message.get("content")
        return _section("user", "You", f'<div class="markdown">{markdown_html(text_of(content))}</div>{_images(content)}')
    if role == "assistant":
        return _assistant(message, results)
    if role == "toolResult":
        css = "tool error" if message.get("isError") else "tool"
        return _section(css, f"Tool result <span class=\"muted\">{_e(message.get('toolName', ''))}</span>", _output(text_of(message.get("content"))))
    if role == "bashExecution":
        output = message.get("output")
        output = output if isinstance(output, str) else ""
        code = message.get("exitCode")
        status = " (cancelled)" if message.get("cancelled") else f" (exit {code})" if code not in (0, None) else ""
        header = f'<div class="tool-header"><span class="tool-command">$ {_e(message.get("command", ""))}</span>{_e(status)}</div>'
        return _section("tool bash", "Bash", header + _output(output))
    if role == "custom":
        if message.get("display") is False:
            return ""
        return _section("custom", f"{_e(message.get('customType') or 'custom')}", f'<div class="markdown">{markdown_html(text_of(message.get("content")))}</div>')
    return ""


def _summary(kind: str, title: str, text: Any) -> str:
    body = f'<details class="summary-text"><summary>{_e(title)}</summary><div class="markdown">{markdown_html(text if isinstance(text, str) else "")}</div></details>'
    return _section(f"summary {kind}", _e(title.split(" (")[0]), body)


def entry_html(entry: dict, results: dict[str, dict]) -> str:
    """The block ``entry`` shows in the conversation ("" for entries shown nowhere);
    ``results``: the results of this entry's tool calls by ``toolCallId`` (an assistant's)."""
    kind = entry.get("type")
    if kind == "message" and isinstance(entry.get("message"), dict):
        return _message(entry["message"], results)
    if kind == "custom_message":
        message = {"role": "custom", "customType": entry.get("customType"), "content": entry.get("content"), "display": entry.get("display")}
        return _message(message, results)
    if kind == "compaction":
        before = entry.get("tokensBefore")
        return _summary("compaction", f"Compaction ({before} tokens before)" if before else "Compaction", entry.get("summary"))
    if kind == "branch_summary":
        return _summary("branch", "Branch summary", entry.get("summary"))
    if kind == "model_change":
        return f'<div class="setting muted">Model: {_e(entry.get("provider", ""))}/{_e(entry.get("modelId", ""))}</div>'
    if kind == "thinking_level_change":
        return f'<div class="setting muted">Thinking level: {_e(entry.get("thinkingLevel", ""))}</div>'
    return ""
