"""Tables, ratios and the issue-9 budgets, as text for the terminal and Markdown for RESULTS.md."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .e2e import ScenarioResult
from .micro import MicroResult

__all__ = ["Budget", "budgets", "scenario_table", "budget_lines", "micro_table"]

PA, PI = "pi-actors", "pi"


def _fmt(v: float | None, unit: str, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}{unit}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return "—"
    return f"{a / b:.2f}×"


def _mib(kb: float | None) -> float | None:
    return None if kb is None else kb / 1024


def scenario_rows(results: list[ScenarioResult], rounds: int) -> list[list[str]]:
    rows = []
    for res in results:
        s = res.scenario
        cells = {}
        for cli in (PA, PI):
            cells[cli] = [
                _fmt(res.median(cli, "wall"), " s"),
                _fmt(res.median(cli, "cpu"), " s"),
                _fmt(_mib(res.median(cli, "max_rss_kb")), " MiB", 1),
                _fmt(_mib(res.median(cli, "tree_rss_kb")), " MiB", 1),
                f"{len(res.ok(cli))}/{len(res.ok(cli)) + len(res.failures.get(cli, []))}",
            ]
        rows.append([f"({s.key}) {s.title}", PA, *cells[PA]])
        if res.ok(PI) or res.failures.get(PI):
            rows.append(["", PI, *cells[PI]])
            rows.append(
                [
                    "",
                    "pi-actors/pi",
                    _ratio(res.median(PA, "wall"), res.median(PI, "wall")),
                    _ratio(res.median(PA, "cpu"), res.median(PI, "cpu")),
                    _ratio(res.median(PA, "max_rss_kb"), res.median(PI, "max_rss_kb")),
                    _ratio(res.median(PA, "tree_rss_kb"), res.median(PI, "tree_rss_kb")),
                    "",
                ]
            )
    return rows


SCENARIO_HEADER = ["scenario", "CLI", "wall (median)", "CPU user+sys (median)", "largest process RSS (median)", "tree RSS (median)", "runs ok"]


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)))
    return "\n".join(lines)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def scenario_table(results: list[ScenarioResult], rounds: int, markdown: bool = False) -> str:
    rows = scenario_rows(results, rounds)
    return (_md_table if markdown else _text_table)(SCENARIO_HEADER, rows)


SPLIT_HEADER = ["scenario", "CLI", "start → 1st request", "1st → last request", "last request → exit", "1st → 2nd request"]


def split_table(results: list[ScenarioResult], markdown: bool = False) -> str:
    """Where the time goes, by the scripted server's clock (medians)."""
    rows = []
    for res in results:
        if res.scenario.name.startswith("startup"):
            continue
        first = True
        for cli in (PA, PI):
            if not res.ok(cli):
                continue
            rows.append([
                f"({res.scenario.key})" if first else "", cli,
                _fmt(res.median_extra(cli, "to_first_request"), " s"),
                _fmt(res.median_extra(cli, "request_span"), " s"),
                _fmt(res.median_extra(cli, "after_last_request"), " s"),
                _fmt(res.median_extra(cli, "first_to_second_request"), " s"),
            ])
            first = False
    return (_md_table if markdown else _text_table)(SPLIT_HEADER, rows)


@dataclass
class Budget:
    key: str
    text: str
    status: str  # "MET", "NOT MET", "NOT EVALUATED"
    figures: str


def _by_key(results: list[ScenarioResult]) -> dict[str, ScenarioResult]:
    return {r.scenario.key: r for r in results}


def _n(res: ScenarioResult) -> int:
    return int(res.scenario.name.rsplit("-", 1)[1])


def budgets(results: list[ScenarioResult], pi_reason: str | None) -> list[Budget]:
    r = _by_key(results)
    out: list[Budget] = []
    no_pi = f"NOT EVALUATED ({pi_reason or 'no pi figures'})"

    def med(key: str, cli: str, attr: str = "wall") -> float | None:
        return r[key].median(cli, attr) if key in r else None

    # (a) trivial prompt: wall <= 0.8x pi
    a_pa, a_pi = med("a", PA), med("a", PI)
    if a_pa is None:
        out.append(Budget("a", "trivial prompt wall ≤ 0.8× pi", "NOT EVALUATED (no pi-actors figure)", ""))
    elif a_pi is None:
        out.append(Budget("a", "trivial prompt wall ≤ 0.8× pi", no_pi, f"pi-actors {a_pa:.3f} s"))
    else:
        out.append(Budget("a", "trivial prompt wall ≤ 0.8× pi", "MET" if a_pa <= 0.8 * a_pi else "NOT MET",
                          f"pi-actors {a_pa:.3f} s, pi {a_pi:.3f} s: {a_pa / a_pi:.2f}× (limit {0.8 * a_pi:.3f} s)"))

    # (b) 32 parallel calls <= 1.15 s above the trivial prompt
    if "b32" in r and a_pa is not None and med("b32", PA) is not None:
        above = med("b32", PA) - a_pa
        pi_txt = ""
        if a_pi is not None and med("b32", PI) is not None:
            pi_txt = f"; pi: {med('b32', PI) - a_pi:.3f} s above its trivial prompt"
        phase = [(cli, r["b32"].median_extra(cli, "first_to_second_request")) for cli in (PA, PI)]
        phase_txt = ", ".join(f"{cli} {v:.3f} s" for cli, v in phase if v is not None)
        if phase_txt:
            pi_txt += f" (tool phase, 1st → 2nd request: {phase_txt})"
        out.append(Budget("b", "32 parallel `sleep 1` calls ≤ 1.15 s above the trivial prompt", "MET" if above <= 1.15 else "NOT MET",
                          f"pi-actors {med('b32', PA):.3f} s − {a_pa:.3f} s = {above:.3f} s{pi_txt}"))
    else:
        out.append(Budget("b", "32 parallel `sleep 1` calls ≤ 1.15 s above the trivial prompt", "NOT EVALUATED (scenario b32 or a not run)", ""))

    # (c) per-turn overhead <= pi's, with durable session writes: the span from the first to
    # the last request, by the server's clock, divided by the number of turns. Start-up and
    # shutdown (and their noise, larger than pi's whole per-turn cost) stay out of it.
    text_c = "per-turn overhead ≤ pi's (session written)"
    if "c" in r and r["c"].median_extra(PA, "request_span") is not None:
        n = _n(r["c"])
        text_c = f"per-turn overhead ≤ pi's ({n} turns, session written)"
        pa_turn = r["c"].median_extra(PA, "request_span") / n
        pi_span = r["c"].median_extra(PI, "request_span")
        if pi_span is not None:
            pi_turn = pi_span / n
            out.append(Budget("c", text_c, "MET" if pa_turn <= pi_turn else "NOT MET",
                              f"pi-actors {pa_turn * 1000:.1f} ms/turn, pi {pi_turn * 1000:.1f} ms/turn: {pa_turn / pi_turn:.2f}×"
                              " (1st → last request by the server's clock, / turns)"))
        else:
            out.append(Budget("c", text_c, no_pi, f"pi-actors {pa_turn * 1000:.1f} ms/turn"))
    else:
        out.append(Budget("c", text_c, "NOT EVALUATED (scenario c not run)", ""))

    # (d) deltas per second >= 1.5x pi's: the reply's handling is the time from its request to
    # the exit, minus the same for the trivial prompt (whose reply is 3 deltas).
    text_d = "deltas per second ≥ 1.5× pi's"

    def handling(cli: str) -> float | None:
        d, a = r["d"].median_extra(cli, "after_last_request"), r["a"].median_extra(cli, "after_last_request")
        return None if d is None or a is None else max(1e-6, d - a)

    if "d" in r and "a" in r and handling(PA) is not None:
        n = _n(r["d"])
        pa_rate = n / handling(PA)
        if handling(PI) is not None:
            pi_rate = n / handling(PI)
            out.append(Budget("d", text_d, "MET" if pa_rate >= 1.5 * pi_rate else "NOT MET",
                              f"pi-actors {pa_rate:,.0f}/s, pi {pi_rate:,.0f}/s: {pa_rate / pi_rate:.2f}×"
                              f" (n / (request → exit of d − the same of a); whole runs: {n / med('d', PA):,.0f}/s vs {n / med('d', PI):,.0f}/s)"))
        else:
            out.append(Budget("d", text_d, no_pi, f"pi-actors {pa_rate:,.0f}/s"))
    else:
        out.append(Budget("d", text_d, "NOT EVALUATED (scenario d or a not run)", ""))

    # RSS: largest single process <= pi's, in every scenario
    parts, worst_ok = [], True
    any_pi = False
    for res in results:
        pa_rss, pi_rss = res.median(PA, "max_rss_kb"), res.median(PI, "max_rss_kb")
        if pa_rss is None or pi_rss is None:
            continue
        any_pi = True
        worst_ok &= pa_rss <= pi_rss
        parts.append(f"({res.scenario.key}) {pa_rss / 1024:.0f} vs {pi_rss / 1024:.0f} MiB")
    text = "peak RSS of the largest single process ≤ pi's (every scenario)"
    if any_pi:
        out.append(Budget("rss", text, "MET" if worst_ok else "NOT MET", "; ".join(parts)))
    else:
        out.append(Budget("rss", text, no_pi, ""))
    return out


def budget_lines(bs: list[Budget], markdown: bool = False) -> str:
    if markdown:
        return _md_table(["budget", "status", "figures"], [[f"({b.key}) {b.text}", f"**{b.status}**", b.figures] for b in bs])
    return "\n".join(f"  [{b.status}] ({b.key}) {b.text}: {b.figures}" for b in bs)


# Suggested per-operation targets from the peers' survey (landscape: Codex, Claude Code, OpenHands) (not issue budgets).
LANDSCAPE_TARGETS = {
    "frame encode+decode": ("per-message codec + framing < 10 µs", lambda us: us < 10),
    "call round trip, unix socketpair, two processes": ("local socket round trip < 100 µs", lambda us: us < 100),
    "in-process hop": ("in-process hop < 20 µs", lambda us: us < 20),
    "actor spawn": ("actor spawn < 300 ms cold (wall)", lambda us: us < 300_000),
}


def micro_rows(results: list[MicroResult]) -> list[list[str]]:
    rows = []
    groups: dict[str, list[MicroResult]] = {}
    for m in results:
        groups.setdefault(m.group, []).append(m)
    for group, items in groups.items():
        base = next((m for m in items if m.baseline and m.name.startswith("baseline")), None)
        for m in items:
            val = f"{m.value:,.0f} {m.unit}" if m.unit == "/s" else f"{m.value:,.1f} {m.unit}"
            # The baseline to compare with: same suffix (p50/p99, "wall p50", "CPU p50").
            rel = ""
            if base is not None and not m.baseline:
                suffix = " ".join(m.name.split()[-2:]) if m.unit == "ms" else m.name.split()[-1]
                twin = next((b for b in items if b.baseline and b.name.startswith("baseline") and b.name.endswith(suffix)), base)
                if m.unit == "/s":
                    rel = f"{m.value / twin.value:.2f}× baseline rate"
                    per = 1e6 / m.value
                    rel += f" ({per:.1f} µs each)"
                else:
                    rel = f"{m.value / twin.value:.2f}× baseline time"
                    if m.unit == "ms":
                        rel += f" ({twin.name.split(',')[0].removeprefix('baseline ')})"
            rows.append([group, m.name, val, rel])
            group = ""
    return rows


def micro_table(results: list[MicroResult], markdown: bool = False) -> str:
    header = ["benchmark", "implementation", "figure", "vs baseline"]
    return (_md_table if markdown else _text_table)(header, micro_rows(results))


def landscape_lines(results: list[MicroResult]) -> list[str]:
    """Each landscape target against the slowest pi-actors figure of its group (p50s, rates)."""
    out = []
    for prefix, (text, ok) in LANDSCAPE_TARGETS.items():
        vals = []
        for m in results:
            if m.baseline or not m.group.startswith(prefix):
                continue
            if m.unit == "/s":
                vals.append(1e6 / m.value)
            elif m.unit == "ms":
                if "wall" in m.name:
                    vals.append(m.value * 1000)
            elif not m.name.endswith("p99"):
                vals.append(m.value)
        if vals:
            worst = max(vals)
            shown = f"{worst / 1000:.1f} ms" if worst >= 10_000 else f"{worst:.1f} µs"
            out.append(f"{text}: slowest pi-actors figure {shown}, {'within' if ok(worst) else 'outside'} the target")
    return out
