"""The last run's figures, to print beside this run's (issue 15, requirement 5).

``python -m benchmarks`` shows each micro-benchmark and tool-dispatch figure next to the same
figure of the last run. The last run is read from what it left behind — either:

* a ``RESULTS.md`` written by ``--results`` (by default ``benchmarks/RESULTS.md``, read before
  this run rewrites it): the rows of its "## Micro-benchmarks" and "## Tool dispatch" tables,
  and the date and commit from its header; or
* a file written by ``--json``: its ``micro`` and ``dispatch`` entries and ``machine``.

A figure is matched by its name: ``(benchmark, implementation)`` for a micro-benchmark (the
table's first column is carried down over the rows it spans), the figure's name for tool
dispatch. A figure the last run did not have shows as "—". :func:`parse_results_md` reads any
text without raising (a row it does not understand is skipped); :func:`load_previous` raises
:class:`PreviousError` (one line) for a file named explicitly that cannot be read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Previous", "PreviousError", "parse_results_md", "load_previous", "format_figure", "figure_value"]

MICRO_SECTION = "## Micro-benchmarks"
DISPATCH_SECTION = "## Tool dispatch"


class PreviousError(Exception):
    """The last run's file cannot be read (the message is one line)."""


@dataclass
class Previous:
    label: str  # "2026-11-30 10:49 UTC, commit 4f70190"
    micro: dict[tuple[str, str], str] = field(default_factory=dict)
    dispatch: dict[str, str] = field(default_factory=dict)


def format_figure(value: float, unit: str) -> str:
    """A figure as the tables print it (``116,702 /s``, ``126.7 µs``, ``0.240 s``)."""
    if unit == "/s":
        return f"{value:,.0f} /s"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:,.1f} {unit}"


_NUMBER = re.compile(r"^\s*(-?[\d,]*\.?\d+)\s*(\S+)\s*$")


def figure_value(text: str) -> tuple[float, str] | None:
    """``(value, unit)`` of a figure as printed by :func:`format_figure`, or None."""
    m = _NUMBER.match(text)
    if m is None:
        return None
    try:
        return float(m.group(1).replace(",", "")), m.group(2)
    except ValueError:
        return None


def _cells(line: str) -> list[str] | None:
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")) or len(line) < 2:
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def _section(lines: list[str], title: str) -> list[list[str]]:
    """The body rows of the first table under the heading ``title`` (up to the next heading)."""
    rows: list[list[str]] = []
    inside = False
    for line in lines:
        if line.startswith("## "):
            if inside:
                break
            inside = line.strip() == title
            continue
        if not inside:
            continue
        cells = _cells(line)
        if cells is None:
            if rows:
                break
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the separator row
        rows.append(cells)
    return rows[1:]  # the first row is the header


def parse_results_md(text: str) -> Previous:
    """The last run's figures from a RESULTS.md text (see the module docstring). Never raises."""
    lines = text.splitlines()
    label = "the last RESULTS.md"
    for line in lines:
        m = re.match(r"- date: (.+?); code: commit (\S+?),", line)
        if m:
            label = f"{m.group(1)}, commit {m.group(2)}"
            break
    micro: dict[tuple[str, str], str] = {}
    group = ""
    for cells in _section(lines, MICRO_SECTION):
        if len(cells) < 3:
            continue
        group = cells[0] or group
        if group and cells[1]:
            micro[(group, cells[1])] = cells[2]
    dispatch = {cells[0]: cells[1] for cells in _section(lines, DISPATCH_SECTION) if len(cells) >= 2 and cells[0]}
    return Previous(label, micro, dispatch)


def _from_json(doc: Any) -> Previous:
    if not isinstance(doc, dict):
        raise PreviousError("not a --json file of python -m benchmarks (the top level is not an object)")
    machine = doc.get("machine")
    if not isinstance(machine, dict):
        machine = {}
    label = f"{machine.get('date', '?')}, commit {machine.get('commit', '?')}"
    micro: dict[tuple[str, str], str] = {}
    for m in doc.get("micro") or []:
        try:
            micro[(str(m["group"]), str(m["name"]))] = format_figure(float(m["value"]), str(m["unit"]))
        except (KeyError, TypeError, ValueError):
            raise PreviousError(f"a micro-benchmark entry of the --json file is not group/name/value/unit: {str(m)[:80]}") from None
    dispatch: dict[str, str] = {}
    for row in doc.get("dispatch_rows") or []:
        try:
            name, value, unit = row
            dispatch[str(name)] = format_figure(float(value), str(unit))
        except (TypeError, ValueError):
            raise PreviousError(f"a tool-dispatch entry of the --json file is not [name, value, unit]: {str(row)[:80]}") from None
    return Previous(label, micro, dispatch)


def load_previous(path: str | Path) -> Previous:
    """The last run from a RESULTS.md or a ``--json`` file (by its ``.json`` suffix)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PreviousError(f"cannot read the last run's figures from {path}: {exc}") from None
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise PreviousError(f"{path} is not JSON: {exc}") from None
        try:
            return _from_json(doc)
        except PreviousError as exc:
            raise PreviousError(f"{path}: {exc}") from None
    return parse_results_md(text)
