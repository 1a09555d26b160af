"""The session tree of the exported page's sidebar.

The rows are the conversation entries (messages, custom messages shown to the user,
compactions, branch summaries); bookkeeping entries (model and thinking-level changes,
labels, session names) are skipped and their children hang from the nearest shown ancestor.
Rows come in depth-first order; a row is indented one step below its parent only where the
parent has more than one child (a branch point), so a straight conversation stays flush left.
Labels (``label`` entries, the last one per target wins) are shown on their row.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from ._blocks import as_dict, as_list, text_of

__all__ = ["TreeRow", "path_ids", "tree_rows"]

_SHOWN = {"message", "custom_message", "compaction", "branch_summary"}


@dataclass
class TreeRow:
    """One sidebar row: entry id, shown parent's id, depth, role and one-line preview."""

    id: str
    parent: str | None
    depth: int
    role: str
    preview: str
    label: str | None = None
    children: list[str] = field(default_factory=list)

    def html(self, on_path: bool, current: bool) -> str:
        classes = "tree-row" + (" on-path" if on_path else "") + (" current" if current else "")
        label = f'<span class="tree-label">[{html.escape(self.label)}]</span> ' if self.label else ""
        parent = f' data-parent="{html.escape(self.parent)}"' if self.parent is not None else ""
        parent += ' data-labeled="1"' if self.label else ""
        return (
            f'<div class="{classes}" data-id="{html.escape(self.id)}"{parent} data-role="{self.role}" tabindex="0" '
            f'style="--depth:{self.depth}"><span class="tree-role tree-{self.role}">{self.role}:</span> {label}'
            f'<span class="tree-text">{html.escape(self.preview)}</span></div>'
        )


def _one_line(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _describe(entry: dict) -> tuple[str, str]:
    """(role, preview) of a shown entry."""
    kind = entry.get("type")
    if kind == "compaction":
        return "summary", "compaction: " + _one_line(str(entry.get("summary") or ""))
    if kind == "branch_summary":
        return "summary", "branch summary: " + _one_line(str(entry.get("summary") or ""))
    if kind == "custom_message":
        return "custom", _one_line(text_of(entry.get("content")))
    message = as_dict(entry.get("message"))
    role = message.get("role")
    if role == "assistant":
        parts = as_list(message.get("content"))
        text = " ".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
        calls = [str(p.get("name", "")) for p in parts if isinstance(p, dict) and p.get("type") == "toolCall"]
        preview = _one_line(str(text)) if str(text).strip() else ""
        if calls:
            preview = (preview + " " if preview else "") + "→ " + ", ".join(calls)
        return "assistant", preview or (f"({message.get('stopReason')})" if message.get("stopReason") else "")
    if role == "toolResult":
        return "tool", f"[{message.get('toolName', '')}] " + _one_line(text_of(message.get("content")), 70)
    if role == "bashExecution":
        return "tool", "$ " + _one_line(str(message.get("command", "")))
    if role == "user":
        return "user", _one_line(text_of(message.get("content")))
    return "custom", _one_line(text_of(message.get("content")))


def _key(value: Any) -> str | None:
    return None if value is None else str(value)


def path_ids(parents: dict[str, str | None], leaf: str | None) -> list[str]:
    """Ids from ``leaf`` up to its root (leaf first); stops at a cycle or a missing parent."""
    path: list[str] = []
    seen: set[str] = set()
    node = leaf
    while node is not None and node in parents and node not in seen:
        seen.add(node)
        path.append(node)
        node = parents[node]
    return path


def tree_rows(entries: list[dict]) -> list[TreeRow]:
    """The sidebar rows of ``entries`` in display order (depth-first, oldest child first)."""
    by_id = {_key(e.get("id")): e for e in entries if e.get("id") is not None}
    rows: dict[str, TreeRow] = {}
    for entry in entries:
        key = _key(entry.get("id"))
        if key is None or entry.get("type") not in _SHOWN or key in rows:
            continue
        if entry.get("type") == "custom_message" and entry.get("display") is False:
            continue
        parent = _key(entry.get("parentId"))
        seen = {key}
        while parent is not None and parent not in seen and parent in by_id and by_id[parent].get("type") not in _SHOWN:
            seen.add(parent)
            parent = _key(by_id[parent].get("parentId"))
        role, preview = _describe(entry)
        rows[key] = TreeRow(key, parent if parent in by_id and parent != key else None, 0, role, preview)
    for entry in entries:
        target = _key(entry.get("targetId"))
        if entry.get("type") == "label" and target in rows:
            label = entry.get("label")
            rows[target].label = label if isinstance(label, str) and label else None
    roots = []
    for row in rows.values():
        if row.parent in rows:
            rows[row.parent].children.append(row.id)
        else:
            row.parent = None
            roots.append(row.id)
    ordered: list[TreeRow] = []
    placed: set[str] = set()
    # Rows in a parent cycle have no root above them: each such loop starts at its first row.
    for start in [*roots, *rows]:
        if start in placed:
            continue
        rows[start].parent = None if start not in roots else rows[start].parent
        stack = [(start, 1 if len(roots) > 1 else 0)]
        while stack:
            key, depth = stack.pop()
            if key in placed:
                continue
            placed.add(key)
            row = rows[key]
            row.depth = depth
            ordered.append(row)
            step = 1 if len(row.children) > 1 else 0
            stack.extend((child, depth + step) for child in reversed(row.children))
    return ordered
