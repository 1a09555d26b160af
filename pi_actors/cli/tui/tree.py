"""The ``/tree`` view's logic, without a terminal: which entries are rows, how they are
indented and connected, what each row says, and what the keys of the view do to it.

:class:`TreeView` takes a session's entries (file order, each with ``id``/``parentId``),
its leaf and its labels (entry id → label), as the coordinator's ``tree`` method returns
them, and behaves as pi 0.73.1's tree selector:

* Children are ordered by timestamp, the branch holding the active leaf first. A chain of
  single children stays at one indentation; a branch point indents its children by one
  level (drawn ``├─``/``└─`` with ``│`` gutters), and the first generation after a branch is
  indented once more — also when the branch point is the session's first message, or when
  the session has several roots (they hang off an invisible root).
* Entries on the path from the root to the leaf are marked ``•``; the deepest shown one is
  the active point (``← active``). Labels are shown as ``[label]`` before the text.
* Filters (pi's ``treeFilterMode`` values): ``default`` hides bookkeeping entries (labels,
  custom entries, model/thinking changes, session names), ``no-tools`` also tool results,
  ``user-only`` shows only user messages, ``labeled-only`` only labelled entries, ``all``
  everything. In every mode, assistant messages with tool calls only (no text, not failed)
  are left out unless they are the leaf.
* Search: every whitespace-separated word of the query must occur (case-insensitive) in the
  row's searchable text (role, text, label, command, ...).
* Fold: a root or the first entry of a branch with visible children can be folded; its
  descendants are hidden until it is unfolded. Changing the filter or the search unfolds all.

Everything is recomputed from the visible entries (a hidden entry's children attach to its
nearest visible ancestor), so the drawing stays right under any filter. Pure Python: no
prompt_toolkit, no rich; styles are returned as names for the screen to map.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FILTER_MODES", "TreeRow", "TreeView", "entry_text"]

#: pi's filter modes, in the order Ctrl+O cycles through them.
FILTER_MODES = ("default", "no-tools", "user-only", "labeled-only", "all")
_BOOKKEEPING = frozenset({"label", "custom", "model_change", "thinking_level_change", "session_info"})
_STATUS = {"no-tools": " [no-tools]", "user-only": " [user]", "labeled-only": " [labeled]", "all": " [all]"}

Entry = dict[str, Any]


def _content_text(content: Any, limit: int = 200) -> str:
    if isinstance(content, str):
        return content[:limit]
    out = ""
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            out += str(block.get("text") or "")
            if len(out) >= limit:
                return out[:limit]
    return out


def _flat(text: str) -> str:
    return text.replace("\n", " ").replace("\t", " ").strip()


def _short_path(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home and home != "/" and path.startswith(home) else path


def _tool_call_text(name: str, args: dict[str, Any]) -> str:
    """A tool call as pi's tree shows it: ``[read: path:1-20]``, ``[bash: cmd]`` ..."""
    path = _short_path(str(args.get("path") or args.get("file_path") or ""))
    if name == "read":
        offset, limit = args.get("offset"), args.get("limit")
        if offset is not None or limit is not None:
            start = offset or 1
            path += f":{start}" + (f"-{start + limit - 1}" if limit is not None else "")
        return f"[read: {path}]"
    if name in ("write", "edit"):
        return f"[{name}: {path}]"
    if name == "bash":
        raw = str(args.get("command") or "")
        return f"[bash: {_flat(raw)[:50]}{'...' if len(raw) > 50 else ''}]"
    if name in ("grep", "find"):
        where = _short_path(str(args.get("path") or "."))
        pattern = str(args.get("pattern") or "")
        return f"[grep: /{pattern}/ in {where}]" if name == "grep" else f"[find: {pattern} in {where}]"
    if name == "ls":
        return f"[ls: {_short_path(str(args.get('path') or '.'))}]"
    import json

    text = json.dumps(args, ensure_ascii=False)
    return f"[{name}: {text[:40]}{'...' if len(text) > 40 else ''}]"


def _message_text(msg: dict[str, Any], tool_calls: dict[str, tuple[str, dict[str, Any]]]) -> tuple[str, str]:
    role = msg.get("role")
    if role == "user":
        return "user", "user: " + _flat(_content_text(msg.get("content")))
    if role == "assistant":
        text = _flat(_content_text(msg.get("content")))
        if text:
            return "assistant", "assistant: " + text
        if msg.get("stopReason") == "aborted":
            return "assistant", "assistant: (aborted)"
        if msg.get("errorMessage"):
            return "error", "assistant: " + _flat(str(msg["errorMessage"]))[:80]
        return "assistant", "assistant: (no content)"
    if role == "toolResult":
        call = tool_calls.get(msg.get("toolCallId") or "")
        if call is not None:
            return "muted", _tool_call_text(call[0], call[1] if isinstance(call[1], dict) else {})
        return "muted", f"[{msg.get('toolName') or 'tool'}]"
    if role == "bashExecution":
        return "dim", "[bash]: " + _flat(str(msg.get("command") or ""))
    return "dim", f"[{role}]"


def entry_text(entry: Entry, tool_calls: dict[str, tuple[str, dict[str, Any]]] | None = None) -> tuple[str, str]:
    """``(kind, text)`` of one entry as a tree row shows it; ``kind`` names its style
    (``user``, ``assistant``, ``error``, ``muted``, ``dim``, ``custom``, ``summary``,
    ``compaction``). ``tool_calls`` maps tool call ids to (name, arguments) for tool results."""
    kind = entry.get("type")
    if kind == "message":
        return _message_text(entry.get("message") or {}, tool_calls or {})
    if kind == "custom_message":
        return "custom", f"[{entry.get('customType')}]: " + _flat(_content_text(entry.get("content")))
    if kind == "compaction":
        return "compaction", f"[compaction: {round((entry.get('tokensBefore') or 0) / 1000)}k tokens]"
    if kind == "branch_summary":
        return "summary", "[branch summary]: " + _flat(str(entry.get("summary") or ""))
    if kind == "label":
        return "dim", f"[label: {entry.get('label') if entry.get('label') is not None else '(cleared)'}]"
    simple = {
        "model_change": lambda: f"[model: {entry.get('modelId')}]",
        "thinking_level_change": lambda: f"[thinking: {entry.get('thinkingLevel')}]",
        "custom": lambda: f"[custom: {entry.get('customType')}]",
        "session_info": lambda: f"[title: {entry.get('name') or 'empty'}]",
    }
    return "dim", simple[kind]() if kind in simple else f"[{kind}]"


def _search_text(entry: Entry, label: str | None) -> str:
    parts = [label] if label else []
    kind = entry.get("type")
    if kind == "message":
        msg = entry.get("message") or {}
        parts += [str(msg.get("role")), _content_text(msg.get("content"))]
        if msg.get("role") == "bashExecution":
            parts.append(str(msg.get("command") or ""))
    elif kind == "custom_message":
        parts += [str(entry.get("customType")), _content_text(entry.get("content"))]
    elif kind == "compaction":
        parts.append("compaction")
    elif kind == "branch_summary":
        parts += ["branch summary", str(entry.get("summary") or "")]
    elif kind == "session_info":
        parts += ["title", str(entry.get("name") or "")]
    elif kind == "model_change":
        parts += ["model", str(entry.get("modelId"))]
    elif kind == "thinking_level_change":
        parts += ["thinking", str(entry.get("thinkingLevel"))]
    elif kind == "custom":
        parts += ["custom", str(entry.get("customType"))]
    elif kind == "label":
        parts += ["label", str(entry.get("label") or "")]
    return " ".join(parts).lower()


@dataclass
class _Layout:
    """How one visible entry is drawn: indentation level, connector and gutters."""

    indent: int = 0
    connector: bool = False
    last: bool = True
    virtual_root_child: bool = False
    #: (level, draw a │) for each ancestor branch still open at this row.
    gutters: tuple[tuple[int, bool], ...] = ()


@dataclass
class TreeRow:
    """One row of the view as it is drawn: ``prefix`` (indentation and connectors),
    ``on_path`` (on the root→leaf path: drawn ``• ``), ``label`` ([label] or None),
    ``kind``/``text`` (see :func:`entry_text`), ``active`` (the active point),
    ``selected`` (under the cursor)."""

    entry_id: str
    prefix: str
    on_path: bool
    label: str | None
    kind: str
    text: str
    active: bool = False
    selected: bool = False
    folded: bool = False

    def plain(self) -> str:
        """The row as plain text (cursor, prefix, markers, label, text, active marker)."""
        return (
            ("› " if self.selected else "  ")
            + self.prefix
            + ("⊞ " if self.folded and "⊞" not in self.prefix else "")
            + ("• " if self.on_path else "")
            + (f"[{self.label}] " if self.label else "")
            + self.text
            + ("  ← active" if self.active else "")
        )


@dataclass
class TreeView:
    """The state of one open tree view (see the module docstring).

    ``entries``: the session's entries in file order; ``leaf_id``: its leaf; ``labels``:
    entry id → label; ``filter_mode``: one of :data:`FILTER_MODES` (ValueError otherwise);
    ``selected_id``: the entry to start on (default: the leaf, or its nearest shown ancestor).
    """

    entries: list[Entry]
    leaf_id: str | None
    labels: dict[str, str] = field(default_factory=dict)
    filter_mode: str = "default"
    selected_id: str | None = None
    search: str = ""

    def __post_init__(self) -> None:
        if self.filter_mode not in FILTER_MODES:
            raise ValueError(f"unknown tree filter mode {self.filter_mode!r}; one of {', '.join(FILTER_MODES)}")
        self.labels = {k: v for k, v in self.labels.items() if v}
        self._by_id: dict[str, Entry] = {}
        for e in self.entries:
            if isinstance(e.get("id"), str):
                self._by_id[e["id"]] = e
        self._tool_calls: dict[str, tuple[str, dict[str, Any]]] = {}
        for e in self.entries:
            msg = e.get("message") or {}
            if e.get("type") == "message" and msg.get("role") == "assistant":
                for b in msg.get("content") or []:
                    if isinstance(b, dict) and b.get("type") == "toolCall":
                        self._tool_calls[str(b.get("id"))] = (str(b.get("name")), b.get("arguments") or {})
        self.active_path: set[str] = set()
        cur = self.leaf_id
        while cur is not None and cur in self._by_id and cur not in self.active_path:
            self.active_path.add(cur)
            cur = self._parent(cur)
        self.folded: set[str] = set()
        self._order = self._ordered_ids()
        self.visible: list[str] = []
        self._layout: dict[str, _Layout] = {}
        self._vparent: dict[str, str | None] = {}
        self._vchildren: dict[str | None, list[str]] = {}
        self._multiple_roots = False
        self.index = 0
        self._last: str | None = None
        self._refresh(keep=self.selected_id if self.selected_id is not None else self.leaf_id)

    # -- structure ---------------------------------------------------------------------------

    def _parent(self, entry_id: str) -> str | None:
        parent = self._by_id[entry_id].get("parentId")
        return parent if isinstance(parent, str) and parent in self._by_id and parent != entry_id else None

    def _ordered_ids(self) -> list[str]:
        """All entry ids depth-first: children by timestamp, the active branch first."""
        children: dict[str | None, list[str]] = {}
        for e in self.entries:
            eid = e.get("id")
            if isinstance(eid, str):
                children.setdefault(self._parent(eid), []).append(eid)
        for kids in children.values():
            kids.sort(key=lambda i: (0 if i in self.active_path else 1, str(self._by_id[i].get("timestamp") or "")))
        out: list[str] = []
        stack = list(reversed(children.get(None, [])))
        seen: set[str] = set()
        while stack:
            eid = stack.pop()
            if eid in seen:
                continue
            seen.add(eid)
            out.append(eid)
            stack.extend(reversed(children.get(eid, [])))
        return out

    def _shown(self, eid: str, words: list[str]) -> bool:
        entry = self._by_id[eid]
        kind = entry.get("type")
        msg = entry.get("message") or {}
        role = msg.get("role") if kind == "message" else None
        if role == "assistant" and eid != self.leaf_id:
            has_text = bool(_content_text(msg.get("content"), 10**9).strip())
            failed = msg.get("stopReason") not in (None, "stop", "toolUse")
            if not has_text and not failed:
                return False
        mode = self.filter_mode
        if mode == "user-only":
            ok = role == "user"
        elif mode == "no-tools":
            ok = kind not in _BOOKKEEPING and role != "toolResult"
        elif mode == "labeled-only":
            ok = eid in self.labels
        elif mode == "all":
            ok = True
        else:
            ok = kind not in _BOOKKEEPING
        if not ok:
            return False
        text = _search_text(entry, self.labels.get(eid))
        return all(w in text for w in words)

    def _refresh(self, keep: str | None = None) -> None:
        """Recompute the visible rows and their drawing; the cursor stays on ``keep`` (or the
        selected entry), or moves to its nearest visible ancestor."""
        if self.visible:  # (an empty result keeps the entry chosen before it)
            self._last = self.visible[min(self.index, len(self.visible) - 1)]
        if keep is None:
            keep = self._last
        words = self.search.lower().split()
        shown = [eid for eid in self._order if self._shown(eid, words)]
        if self.folded:
            hidden: set[str] = set()
            for eid in self._order:
                parent = self._parent(eid)
                if parent is not None and (parent in self.folded or parent in hidden):
                    hidden.add(eid)
            shown = [eid for eid in shown if eid not in hidden]
        self.visible = shown
        self._lay_out()
        self.index = self._nearest(keep)

    def _visible_ancestor(self, eid: str, shown: set[str]) -> str | None:
        cur = self._parent(eid)
        while cur is not None and cur not in shown:
            cur = self._parent(cur)
        return cur

    def _lay_out(self) -> None:
        shown = set(self.visible)
        self._vparent, self._vchildren = {}, {None: []}
        for eid in self.visible:
            parent = self._visible_ancestor(eid, shown)
            self._vparent[eid] = parent
            self._vchildren.setdefault(parent, []).append(eid)
        roots = self._vchildren[None]
        multi = self._multiple_roots = len(roots) > 1
        self._layout = {}
        # (id, indent, just branched, connector, last, gutters, virtual root child)
        no_gutters: tuple[tuple[int, bool], ...] = ()
        stack = [(r, 1 if multi else 0, multi, multi, i == len(roots) - 1, no_gutters, multi) for i, r in enumerate(roots)][::-1]
        while stack:
            eid, indent, branched, connector, last, gutters, virtual = stack.pop()
            self._layout[eid] = _Layout(indent, connector, last, virtual, gutters)
            kids = self._vchildren.get(eid, [])
            many = len(kids) > 1
            child_indent = indent + 1 if many or (branched and indent > 0) else indent
            if connector and not virtual:
                display = max(0, indent - 1) if multi else indent
                gutters = (*gutters, (max(0, display - 1), not last))
            stack.extend((k, child_indent, many, many, i == len(kids) - 1, gutters, False) for i, k in reversed(list(enumerate(kids))))

    def _nearest(self, eid: str | None) -> int:
        """Index of ``eid`` among the visible rows, else of its nearest visible ancestor,
        else the last row."""
        if not self.visible:
            return 0
        where = {v: i for i, v in enumerate(self.visible)}
        seen: set[str] = set()
        while eid is not None and eid in self._by_id and eid not in seen:
            if eid in where:
                return where[eid]
            seen.add(eid)
            eid = self._parent(eid)
        return len(self.visible) - 1

    # -- what is drawn -----------------------------------------------------------------------

    @property
    def selected(self) -> str | None:
        """The entry under the cursor (None when no row is shown)."""
        return self.visible[self.index] if self.visible else None

    @property
    def active_id(self) -> str | None:
        """The active point: the deepest visible entry on the root→leaf path."""
        on_path = [eid for eid in self.visible if eid in self.active_path]
        return on_path[-1] if on_path else None

    def is_current(self, eid: str) -> bool:
        """Whether going to ``eid`` changes nothing: it is the leaf, or only bookkeeping
        entries (labels, names, model/thinking changes, custom entries) follow it up to the leaf."""
        if eid not in self.active_path:
            return False
        cur = self.leaf_id
        while cur is not None and cur != eid:
            if self._by_id[cur].get("type") not in _BOOKKEEPING:
                return False
            cur = self._parent(cur)
        return cur == eid

    def foldable(self, eid: str) -> bool:
        """A root or the first entry of a branch, with visible children."""
        if not self._vchildren.get(eid):
            return False
        parent = self._vparent.get(eid)
        return parent is None or len(self._vchildren.get(parent, [])) > 1

    def _prefix(self, eid: str) -> str:
        lay = self._layout[eid]
        display = max(0, lay.indent - 1) if self._multiple_roots else lay.indent
        connector = lay.connector and not lay.virtual_root_child
        at = display - 1 if connector else -1
        gutters = dict(lay.gutters)
        chars: list[str] = []
        for level in range(display):
            if level in gutters:
                chars.append(("│" if gutters[level] else " ") + "  ")
            elif level == at:
                mid = "⊞" if eid in self.folded else "⊟" if self.foldable(eid) else "─"
                chars.append(("└" if lay.last else "├") + mid + " ")
            else:
                chars.append("   ")
        return "".join(chars)

    def rows(self, height: int) -> list[TreeRow]:
        """At most ``height`` rows around the cursor (it stays in the middle when it can)."""
        height = max(1, height)
        start = max(0, min(self.index - height // 2, len(self.visible) - height))
        active = self.active_id
        out = []
        for i in range(start, min(start + height, len(self.visible))):
            eid = self.visible[i]
            kind, text = entry_text(self._by_id[eid], self._tool_calls)
            out.append(
                TreeRow(
                    entry_id=eid,
                    prefix=self._prefix(eid),
                    on_path=eid in self.active_path,
                    label=self.labels.get(eid),
                    kind=kind,
                    text=text,
                    active=eid == active,
                    selected=i == self.index,
                    folded=eid in self.folded,
                )
            )
        return out

    def status(self) -> str:
        """``(i/N)`` and the filter in use, as pi's last row (``(0/0)`` when nothing shows)."""
        n = len(self.visible)
        return f"({self.index + 1 if n else 0}/{n}){_STATUS.get(self.filter_mode, '')}"

    # -- keys ----------------------------------------------------------------------------------

    def move(self, delta: int) -> None:
        """Up (-1) / down (+1), wrapping around at the ends."""
        if self.visible:
            self.index = (self.index + delta) % len(self.visible)

    def page(self, delta: int, height: int) -> None:
        """A page of ``height`` rows up (-1) or down (+1), stopping at the ends."""
        if self.visible:
            self.index = max(0, min(len(self.visible) - 1, self.index + delta * max(1, height)))

    def set_search(self, query: str) -> None:
        if query != self.search:
            self.search = query
            self.folded.clear()
            self._refresh()

    def set_filter(self, mode: str) -> None:
        """``mode`` (a toggle: choosing the mode in use goes back to ``default``)."""
        if mode not in FILTER_MODES:
            raise ValueError(f"unknown tree filter mode {mode!r}; one of {', '.join(FILTER_MODES)}")
        self.filter_mode = "default" if mode == self.filter_mode and mode != "default" else mode
        self.folded.clear()
        self._refresh()

    def cycle_filter(self, step: int = 1) -> None:
        self.filter_mode = FILTER_MODES[(FILTER_MODES.index(self.filter_mode) + step) % len(FILTER_MODES)]
        self.folded.clear()
        self._refresh()

    def set_label(self, eid: str, label: str | None) -> None:
        if label:
            self.labels[eid] = label
        else:
            self.labels.pop(eid, None)
        self._refresh()

    def fold_or_up(self) -> None:
        """Fold the selected entry if it can be folded; else go up to the start of its branch
        segment (or of an earlier one)."""
        eid = self.selected
        if eid is None:
            return
        if self.foldable(eid) and eid not in self.folded:
            self.folded.add(eid)
            self._refresh(keep=eid)
            return
        where = {v: i for i, v in enumerate(self.visible)}
        cur = eid
        while True:
            parent = self._vparent.get(cur)
            if parent is None:
                self.index = where[cur]
                return
            if len(self._vchildren.get(parent, [])) > 1 and where[cur] < self.index:
                self.index = where[cur]
                return
            cur = parent

    def unfold_or_down(self) -> None:
        """Unfold the selected entry if folded; else go down (first children) to the next
        branch point's first child, or to the end of the chain."""
        eid = self.selected
        if eid is None:
            return
        if eid in self.folded:
            self.folded.discard(eid)
            self._refresh(keep=eid)
            return
        where = {v: i for i, v in enumerate(self.visible)}
        cur = eid
        while True:
            kids = self._vchildren.get(cur, [])
            if not kids:
                self.index = where[cur]
                return
            if len(kids) > 1:
                self.index = where[kids[0]]
                return
            cur = kids[0]
