"""A session as one self-contained HTML page (pi's ``/export`` and ``--export``).

The page holds the whole session tree: a sidebar lists every conversation entry (branches
indented, the current branch marked, with search and filters), and the conversation pane
shows the branch that ends at the session's leaf — clicking a row shows the branch through
it instead. Messages are rendered Markdown (headings, tables, code, http(s)/mailto links);
tool calls appear with their results (``edit`` as a coloured diff); thinking is collapsed;
light and dark palettes. Everything is inside the one file — the style sheet, the script and
images as ``data:`` URLs — and a Content-Security-Policy lets the page load nothing else and
run no script but its own. All session text is escaped (see :mod:`._blocks`).

The default file name is pi's: ``pi-session-<session file name without .jsonl>.html``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from typing import Any

from ._assets import SCRIPT, STYLE
from ._blocks import as_dict, as_list, entry_html
from ._markdown import markdown_html
from ._tree import TreeRow, path_ids, tree_rows

__all__ = ["TreeRow", "default_export_name", "export_html", "markdown_html", "render_html", "tree_rows"]


def default_export_name(session_path: str | None, session_id: Any = None) -> str:
    """pi's default output name: ``pi-session-<basename without .jsonl>.html`` (for a session
    without a file, ``pi-session-<session id>.html``)."""
    if session_path:
        stem = os.path.basename(session_path)
        stem = stem[: -len(".jsonl")] if stem.endswith(".jsonl") else stem
    else:
        stem = str(session_id or "export")
    return f"pi-session-{stem}.html"


def _stamp(entry: dict) -> str:
    """The entry's time as ``YYYY-MM-DD HH:MM:SS`` (UTC, from its ISO timestamp), or ""."""
    value = entry.get("timestamp")
    if entry.get("type") not in ("message", "custom_message", "compaction", "branch_summary") or not isinstance(value, str):
        return ""
    shown = value.replace("T", " ")[:19]
    return f'<div class="stamp"><time datetime="{html.escape(value)}">{html.escape(shown)}</time></div>'


def _json_block(value: Any) -> str:
    """JSON that cannot end its ``<script>`` element early."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _info(header: dict, entries: list[dict]) -> str:
    models: list[str] = []
    counts = {"user": 0, "assistant": 0, "toolCall": 0}
    tokens = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    cost = 0.0
    for entry in entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            counts["user"] += 1
        elif role == "assistant":
            counts["assistant"] += 1
            content = as_list(message.get("content"))
            counts["toolCall"] += len([b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"])
            name = f"{message.get('provider', '')}/{message.get('model', '')}"
            if name not in models:
                models.append(name)
            usage = as_dict(message.get("usage"))
            for key in tokens:
                value = usage.get(key)
                tokens[key] += value if isinstance(value, int) else 0
            total = as_dict(usage.get("cost")).get("total")
            cost += total if isinstance(total, int | float) else 0.0
    rows = [
        ("Session", header.get("id", "")),
        ("Date", header.get("timestamp", "")),
        ("Directory", header.get("cwd", "")),
        ("Models", ", ".join(models) or "—"),
        ("Messages", f"{counts['user']} user, {counts['assistant']} assistant, {counts['toolCall']} tool calls"),
        ("Tokens", f"{tokens['input']} in, {tokens['output']} out, {tokens['cacheRead']} cache read, {tokens['cacheWrite']} cache write"),
    ]
    if cost:
        rows.append(("Cost", f"${cost:.4f}"))
    return "".join(f"<span>{html.escape(k)}</span><b>{html.escape(str(v))}</b>" for k, v in rows)


def _pair_results(entries: list[dict]) -> tuple[dict[str, dict[str, dict]], set[str]]:
    """Tool results by the assistant entry that made the call: ``({assistant id: {toolCallId:
    result message}}, ids of the paired result entries)``. A result belongs to the nearest
    assistant message above it in the tree (call ids need not be unique across a session)."""
    by_id = {str(e["id"]): e for e in entries if e.get("id") is not None}
    calls: dict[str, set[str]] = {}
    for key, entry in by_id.items():
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), list):
            calls[key] = {str(b.get("id")) for b in message["content"] if isinstance(b, dict) and b.get("type") == "toolCall"}
    results: dict[str, dict[str, dict]] = {}
    paired: set[str] = set()
    for key, entry in by_id.items():
        message = entry.get("message") if entry.get("type") == "message" else None
        if not (isinstance(message, dict) and message.get("role") == "toolResult"):
            continue
        owner, seen = entry.get("parentId"), {key}
        while owner is not None and str(owner) in by_id and str(owner) not in calls and str(owner) not in seen:
            seen.add(str(owner))
            owner = by_id[str(owner)].get("parentId")
        call_id = str(message.get("toolCallId"))
        if owner is not None and call_id in calls.get(str(owner), set()):
            mine = results.setdefault(str(owner), {})
            if call_id not in mine:
                mine[call_id] = message
                paired.add(key)
    return results, paired


def render_html(header: dict, entries: list[dict], leaf_id: Any = None) -> str:
    """The page for a session: ``header`` (the session line), ``entries`` (all of them, in file
    order) and the leaf whose branch is shown first (default: the last entry)."""
    ids = [str(e["id"]) for e in entries if e.get("id") is not None]
    parents = {str(e["id"]): (None if e.get("parentId") is None else str(e["parentId"])) for e in entries if e.get("id") is not None}
    leaf = str(leaf_id) if leaf_id is not None and str(leaf_id) in parents else (ids[-1] if ids else None)
    on_path = set(path_ids(parents, leaf))

    results, paired = _pair_results(entries)
    blocks = []
    for entry in entries:
        if entry.get("id") is None:
            continue
        if str(entry["id"]) in paired:
            continue  # a tool result shown inside the call that asked for it
        body = entry_html(entry, results.get(str(entry["id"]), {}))
        if body:
            key = html.escape(str(entry["id"]))
            hidden = "" if str(entry["id"]) in on_path else " hidden"
            blocks.append(f'<div class="entry" data-entry="{key}"{hidden}>{_stamp(entry)}{body}</div>')

    rows = tree_rows(entries)
    shown_ids = {row.id for row in rows}
    current = next((i for i in path_ids(parents, leaf) if i in shown_ids), None)
    tree = "\n".join(row.html(row.id in on_path, row.id == current) for row in rows)

    name = next((e.get("name") for e in reversed(entries) if e.get("type") == "session_info" and isinstance(e.get("name"), str) and e["name"]), None)
    title = name or f"Session {header.get('id', '')}"
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    policy = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        '<div id="app"><aside id="sidebar"><div class="sidebar-header">'
        '<input type="search" id="tree-search" placeholder="Search…" aria-label="Search the session tree">'
        '<div class="filters"><button class="filter-btn active" data-filter="all">All</button>'
        '<button class="filter-btn" data-filter="no-tools">No tools</button>'
        '<button class="filter-btn" data-filter="user">User</button>'
        '<button class="filter-btn" data-filter="labeled">Labeled</button></div></div>'
        f'<nav id="tree">\n{tree}\n</nav><div id="tree-status">{len(rows)} entries</div></aside>\n'
        '<main id="content"><header><h1 class="title">'
        f'{html.escape(title)}</h1><div class="actions"><button id="toggle-thinking">Toggle thinking</button>'
        '<button id="theme-toggle" title="Switch light/dark">◐ Theme</button></div></header>'
        f'<div class="info">{_info(header, entries)}</div>\n<div id="messages">\n'
        + "\n".join(blocks)
        + "\n</div></main></div>\n"
        f'<script type="application/json" id="session-tree">{_json_block({"parents": parents, "leaf": leaf})}</script>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def export_html(header: dict, entries: list[dict], path: str, leaf_id: Any = None) -> str:
    """Write the page to ``path`` (parents created, an existing file replaced, as pi does);
    returns the absolute path. Raises OSError when it cannot be written."""
    path = os.path.abspath(os.path.expanduser(path))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(header, entries, leaf_id))
    return path
