"""The ``grep`` tool (pi spec §1.8), on ripgrep from the ``ripgrep`` wheel.

Runs ``rg --json --line-number --color=never --hidden [--ignore-case] [--fixed-strings]
[--glob G] <pattern> <path>`` (so .gitignore is honoured inside git repositories, as in pi,
and hidden files are searched), collects the matches up to ``limit`` (default 100, at least
1; rg is stopped when it is reached), then formats each match from the file itself:
``{p}:{n}: {text}`` for the match line, ``{p}-{n}- {text}`` for ``context`` lines around it,
each line cut to 500 characters. ``{p}`` is the path relative to the searched directory (or
the file's basename when a file was searched). The text is cut at 50KB; the notices
(match limit, byte limit, cut lines) follow in one bracket pair, joined by ``. ``.

Errors: ``Path not found: {abs}``; rg's own message (trimmed) for an exit status other than
0 or 1 — an invalid regular expression gives ``regex parse error: ...``; ``ripgrep (rg) is
not available and could not be downloaded`` when no binary exists.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from typing import Any

import trio

from .base import ToolError, ToolSpec, bool_arg, number_arg, string_arg
from .paths import resolve_to_cwd
from .rg import rg_path, run_rg
from .truncate import DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, MAX_SAFE_INTEGER, format_size, truncate_head, truncate_line

DEFAULT_LIMIT = 100

GREP_SPEC = ToolSpec(
    name="grep",
    label="grep",
    description=(
        "Search file contents for a pattern. Returns matching lines with file paths and line numbers. "
        f"Respects .gitignore. Output is truncated to {DEFAULT_LIMIT} matches or {DEFAULT_MAX_BYTES // 1024}KB "
        f"(whichever is hit first). Long lines are truncated to {GREP_MAX_LINE_LENGTH} chars."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
            "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
            "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
            "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
            "literal": {
                "type": "boolean",
                "description": "Treat pattern as literal string instead of regex (default: false)",
            },
            "context": {
                "type": "number",
                "description": "Number of lines to show before and after each match (default: 0)",
            },
            "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"},
        },
        "required": ["pattern"],
    },
)


def _match_location(line: bytes) -> tuple[str, int] | None:
    """(path, line number) of an rg ``--json`` match event, else None."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("type") != "match":
        return None
    data = event.get("data") or {}
    path = data.get("path") or {}
    if "text" in path:
        file_path = path["text"]
    elif "bytes" in path:
        file_path = os.fsdecode(base64.b64decode(path["bytes"]))
    else:
        return None
    number = data.get("line_number")
    if not isinstance(number, int):
        return None
    return file_path, number


def _format(matches: list[tuple[str, int]], search_path: str, is_dir: bool, context: int, limit: int, limit_reached: bool) -> dict:
    cache: dict[str, list[str]] = {}
    lines_truncated = False

    def display(file_path: str) -> str:
        if is_dir:
            relative = os.path.relpath(file_path, search_path)
            if relative and relative != "." and not relative.startswith(".."):
                return relative.replace(os.sep, "/")
        return os.path.basename(file_path)

    def file_lines(file_path: str) -> list[str]:
        if file_path not in cache:
            try:
                with open(file_path, "rb") as handle:
                    text = handle.read().decode("utf-8", "replace")
                cache[file_path] = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            except OSError:
                cache[file_path] = []
        return cache[file_path]

    output: list[str] = []
    for file_path, number in matches:
        shown = display(file_path)
        lines = file_lines(file_path)
        if not lines:
            output.append(f"{shown}:{number}: (unable to read file)")
            continue
        start = max(1, number - context) if context > 0 else number
        end = min(len(lines), number + context) if context > 0 else number
        for current in range(start, end + 1):
            text = lines[current - 1] if current - 1 < len(lines) else ""
            cut = truncate_line(text.replace("\r", ""))
            lines_truncated = lines_truncated or cut.was_truncated
            sep = ":" if current == number else "-"
            output.append(f"{shown}{sep}{current}{sep} {cut.text}")

    truncation = truncate_head("\n".join(output), max_lines=MAX_SAFE_INTEGER)
    text = truncation.content
    notices: list[str] = []
    details: dict[str, Any] = {}
    if limit_reached:
        notices.append(f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern")
        details["matchLimitReached"] = limit
    if truncation.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = truncation.to_json()
    if lines_truncated:
        notices.append(f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines")
        details["linesTruncated"] = True
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return {"content": [{"type": "text", "text": text}], "details": details or None}


async def run_grep(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    pattern = string_arg(args, "grep", "pattern")
    path_arg = string_arg(args, "grep", "path", required=False)
    glob = string_arg(args, "grep", "glob", required=False)
    ignore_case = bool_arg(args, "grep", "ignoreCase")
    literal = bool_arg(args, "grep", "literal")
    context_arg = number_arg(args, "grep", "context")
    limit_arg = number_arg(args, "grep", "limit")
    await trio.lowlevel.checkpoint_if_cancelled()

    rg = rg_path()
    if rg is None:
        raise ToolError("ripgrep (rg) is not available and could not be downloaded")
    search_path = resolve_to_cwd(path_arg or ".", cwd)
    try:
        is_dir = stat.S_ISDIR(os.stat(search_path).st_mode)
    except (OSError, ValueError):
        raise ToolError(f"Path not found: {search_path}") from None
    context = int(context_arg) if context_arg and context_arg > 0 else 0
    limit = max(1, int(limit_arg) if limit_arg is not None else DEFAULT_LIMIT)

    argv = [rg, "--json", "--line-number", "--color=never", "--hidden"]
    if ignore_case:
        argv.append("--ignore-case")
    if literal:
        argv.append("--fixed-strings")
    if glob:
        argv += ["--glob", glob]
    # "--" keeps a pattern that starts with "-" from being read as an option.
    argv += ["--", pattern, search_path]

    matches: list[tuple[str, int]] = []

    def on_line(line: bytes) -> bool:
        location = _match_location(line)
        if location is not None:
            matches.append(location)
        return len(matches) >= limit

    outcome = await run_rg(argv, cwd=cwd, on_line=on_line)
    if not outcome.stopped and outcome.code not in (0, 1):
        raise ToolError(outcome.stderr.strip() or f"ripgrep exited with code {outcome.code}")
    if not matches:
        return {"content": [{"type": "text", "text": "No matches found"}], "details": None}
    return await trio.to_thread.run_sync(
        _format, matches, search_path, is_dir, context, limit, outcome.stopped, abandon_on_cancel=True
    )
