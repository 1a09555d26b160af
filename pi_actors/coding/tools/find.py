"""The ``find`` tool (pi spec §1.9): files by glob pattern, honouring .gitignore.

pi runs ``fd``; here the file list comes from ``rg --files --hidden --no-require-git``
(ripgrep from the ``ripgrep`` wheel: .gitignore, .ignore and .rgignore files are honoured
inside and outside git repositories, as pi arranges for fd with ``--ignore-file``), with
``.git`` itself left out, and the glob is matched here:

- a pattern without ``/`` is matched against each entry's name (fd's ``--glob``), so
  ``*.ts`` finds ``src/a.ts``;
- a pattern with ``/`` is matched against the path relative to the search directory, so
  ``src/**/*.spec.ts`` works as the tool's description promises (fd refuses such a pattern
  without ``--full-path``: a deliberate difference);
- ``*`` and ``?`` do not cross ``/``; ``**`` spans directories; ``[...]``, ``[!...]`` and
  ``{a,b}`` work as in fd's globs.

Directories are listed too (with a trailing ``/``, as fd prints them) when their name
matches, but only directories that contain at least one listed file: ripgrep lists files.
Results are sorted by path, at most ``limit`` (default 1000), made relative to the search
directory; notices: ``{N} results limit reached. Use limit={2N} for more, or refine
pattern`` and ``50.0KB limit reached``. Errors: ``Path not found: {abs}``, ``Not a
directory: {abs}``, ripgrep's message on failure; no match → ``No files found matching
pattern``.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import trio

from .base import ToolError, ToolSpec, number_arg, string_arg
from .ls import finish_listing
from .paths import resolve_to_cwd
from .rg import rg_path, run_rg
from .truncate import DEFAULT_MAX_BYTES

DEFAULT_LIMIT = 1000

FIND_SPEC = ToolSpec(
    name="find",
    label="find",
    description=(
        "Search for files by glob pattern. Returns matching file paths relative to the search directory. "
        f"Respects .gitignore. Output is truncated to {DEFAULT_LIMIT} results or {DEFAULT_MAX_BYTES // 1024}KB "
        "(whichever is hit first)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'",
            },
            "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
            "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"},
        },
        "required": ["pattern"],
    },
)


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob (see the module docstring) into an anchored regular expression."""
    out: list[str] = []
    i, n = 0, len(pattern)
    brace_depth = 0
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                j = i + 2
                if at_start and (j == n or pattern[j] == "/"):
                    if j == n:
                        out.append(".*")  # "a/**" – everything below
                        i = j
                    else:
                        out.append("(?:.*/)?")  # "**/" – zero or more directories
                        i = j + 1
                    continue
                out.append(".*")
                i = j
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "{":
            brace_depth += 1
            out.append("(?:")
        elif c == "}" and brace_depth:
            brace_depth -= 1
            out.append(")")
        elif c == "," and brace_depth:
            out.append("|")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * brace_depth)
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _select(files: list[str], pattern: str, limit: int) -> list[str]:
    """Matching entries (directories with a trailing ``/``), in path order, up to ``limit``."""
    regex = glob_to_regex(pattern)
    by_path = "/" in pattern.rstrip("/")
    results: list[str] = []
    seen_dirs: set[str] = set()
    for relative in files:
        parts = relative.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory in seen_dirs:
                continue
            seen_dirs.add(directory)
            if regex.match(directory if by_path else parts[depth - 1]):
                results.append(directory + "/")
                if len(results) >= limit:
                    return results
        if regex.match(relative if by_path else parts[-1]):
            results.append(relative)
            if len(results) >= limit:
                return results
    return results


async def run_find(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    pattern = string_arg(args, "find", "pattern")
    path_arg = string_arg(args, "find", "path", required=False)
    limit_arg = number_arg(args, "find", "limit")
    limit = max(1, int(limit_arg)) if limit_arg is not None else DEFAULT_LIMIT
    await trio.lowlevel.checkpoint_if_cancelled()

    rg = rg_path()
    if rg is None:
        raise ToolError("ripgrep (rg) is not available and could not be downloaded")
    search_path = resolve_to_cwd(path_arg or ".", cwd)
    try:
        mode = os.stat(search_path).st_mode
    except (OSError, ValueError):
        raise ToolError(f"Path not found: {search_path}") from None
    if not stat.S_ISDIR(mode):
        raise ToolError(f"Not a directory: {search_path}")

    argv = [rg, "--files", "--hidden", "--no-require-git", "--color=never", "--sort", "path", "--glob", "!.git", "--", "."]
    files: list[str] = []

    def on_line(line: bytes) -> bool:
        if line:
            name = os.fsdecode(line)
            files.append(name[2:] if name.startswith("./") else name)
        return False

    outcome = await run_rg(argv, cwd=search_path, on_line=on_line)
    if outcome.code not in (0, 1) and not files:
        raise ToolError(outcome.stderr.strip() or f"ripgrep exited with code {outcome.code}")

    results = await trio.to_thread.run_sync(_select, files, pattern, limit, abandon_on_cancel=True)
    if not results:
        return {"content": [{"type": "text", "text": "No files found matching pattern"}], "details": None}
    notices: list[str] = []
    details: dict[str, Any] = {}
    if len(results) >= limit:
        notices.append(f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern")
        details["resultLimitReached"] = limit
    return finish_listing(results, notices, details)
