"""Tables, ratios and the issue-15 budgets, as text for the terminal and Markdown for RESULTS.md."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .e2e import ScenarioResult
from .micro import MicroResult
from .previous import Previous, figure_value, format_figure

__all__ = ["Budget", "budgets", "scenario_table", "split_table", "long_table", "budget_lines", "micro_table", "dispatch_table",
           "curve_lines"]

PA, PI = "pi-actors", "pi"


def _fmt(v: float | None, unit: str, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}{unit}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return "—"
    return f"{a / b:.2f}×"


def _times(ratio: float | None) -> str:
    """A ratio already taken (``median_ratio``), as ``_ratio`` writes one."""
    return "—" if ratio is None or math.isnan(ratio) else f"{ratio:.2f}×"


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


SPLIT_HEADER = ["scenario", "CLI", "start → 1st request", "1st → last request", "last request → exit", "1st → 2nd request",
                "client time per turn"]


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
                _fmt(_ms(res.median_extra(cli, "client_per_turn")), " ms", 1),
            ])
            first = False
    return (_md_table if markdown else _text_table)(SPLIT_HEADER, rows)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


LONG_HEADER = ["scenario", "CLI", "per turn / prompt 10", "late turns / prompt N−10", "late ÷ early",
               "session holder RSS after prompt 20 → N", "RSS growth per prompt", "session file per prompt", "growth ÷ file"]


def long_table(results: list[ScenarioResult], markdown: bool = False) -> str:
    """(f) and (g): how each CLI's cost of a turn or a prompt changes along a long session."""
    rows = []
    for res in results:
        key = res.scenario.key
        if key == "f":
            n = _n(res)
            for cli in (PA, PI):
                if not res.ok(cli):
                    continue
                early, late = res.median_extra(cli, "turns_early"), res.median_extra(cli, "turns_late")
                rows.append([f"(f) {n} turns" if cli == PA else "", cli,
                             f"{_fmt(_ms(res.median_extra(cli, 'turn_overhead')), ' ms', 1)} all turns (mean); "
                             f"{_fmt(_ms(early), ' ms', 1)} turns 1–10",
                             f"{_fmt(_ms(late), ' ms', 1)} turns {n - 10}–{n}", _times(res.median_ratio(cli, "turns_late", "turns_early")),
                             "", "", "", ""])
            if res.ok(PA) and res.ok(PI):
                rows.append(["", "pi-actors/pi",
                             f"{_ratio(res.median_extra(PA, 'turn_overhead'), res.median_extra(PI, 'turn_overhead'))} all turns; "
                             f"{_ratio(res.median_extra(PA, 'turns_early'), res.median_extra(PI, 'turns_early'))} turns 1–10",
                             _ratio(res.median_extra(PA, "turns_late"), res.median_extra(PI, "turns_late")), "", "", "", "", ""])
        elif key == "g":
            n = _n(res)
            for cli in (PA, PI):
                if not res.ok(cli):
                    continue
                early, late = res.median_extra(cli, "prompt_early"), res.median_extra(cli, "prompt_late")
                grow, size = res.median_extra(cli, "rss_growth_per_prompt"), res.median_extra(cli, "session_bytes_per_prompt")
                holder = "coordinator" if cli == PA else "node"
                rows.append([f"(g) rpc, {n} prompts" if cli == PA else "", cli,
                             f"{_fmt(_ms(early), ' ms', 1)} (prompts 6–14)", f"{_fmt(_ms(late), ' ms', 1)} (prompts {n - 14}–{n - 6})",
                             _times(res.median_ratio(cli, "prompt_late", "prompt_early")),
                             f"{holder}: {_fmt(_mib(res.median_extra(cli, 'rss_from_kb')), ' MiB', 1)} → "
                             f"{_fmt(_mib(res.median_extra(cli, 'rss_last_kb')), ' MiB', 1)}",
                             _fmt(grow, " B", 0), _fmt(size, " B", 0), _ratio(grow, size)])
            if res.ok(PA) and res.ok(PI):
                rows.append(["", "pi-actors/pi",
                             _ratio(res.median_extra(PA, "prompt_early"), res.median_extra(PI, "prompt_early")),
                             _ratio(res.median_extra(PA, "prompt_late"), res.median_extra(PI, "prompt_late")), "", "",
                             _ratio(res.median_extra(PA, "rss_growth_per_prompt"), res.median_extra(PI, "rss_growth_per_prompt")),
                             "", ""])
    if not rows:
        return ""
    return (_md_table if markdown else _text_table)(LONG_HEADER, rows)


def curve_lines(results: list[ScenarioResult], blocks: int = 6) -> list[str]:
    """(f) and (g) along the session: the median client time per turn (f) or latency per
    prompt (g) in each of ``blocks`` equal stretches of the session, median over runs."""
    out = []
    for res in results:
        series = {"f": "turn_gaps", "g": "latencies"}.get(res.scenario.key)
        if series is None:
            continue
        what = "client time per turn" if res.scenario.key == "f" else "latency per prompt"
        for cli in (PA, PI):
            runs = [m.extra[series] for m in res.ok(cli) if len(m.extra.get(series) or []) >= blocks]
            if not runs:
                continue
            n = min(len(r) for r in runs)
            size = n // blocks
            per_block = [statistics.median(statistics.median(r[i * size:(i + 1) * size]) for r in runs) for i in range(blocks)]
            spans = ", ".join(f"{i * size + 1}–{(i + 1) * size}: {v * 1000:.1f}" for i, v in enumerate(per_block))
            out.append(f"({res.scenario.key}) {cli}, median {what} (ms) by stretch of the session — {spans}")
    return out


@dataclass
class Budget:
    key: str
    text: str
    status: str  # "MET", "NOT MET", "NOT EVALUATED"
    figures: str


# Issue 15, section 3.
A_LIMIT = 0.75  # (a) trivial prompt, × pi's wall
B_LIMIT = 1.10  # (b) b32 − a, seconds
C_LIMIT = 0.9  # (c) per-turn overhead, × pi's
D_LIMIT = 4.0  # (d) deltas per second, × pi's
F_LIMIT = 0.8  # (f) per-turn overhead, × pi's
F_GROWTH = 1.3  # (f) turns 290-300, × turns 1-10
G_LATENCY = 1.5  # (g) latency at prompt 290, × prompt 10
G_RSS = 2.0  # (g) coordinator RSS growth per prompt, × session-file bytes per prompt
RSS_LIMIT = 0.5  # largest process RSS, × pi's, every scenario


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _by_key(results: list[ScenarioResult]) -> dict[str, ScenarioResult]:
    return {r.scenario.key: r for r in results}


def _n(res: ScenarioResult) -> int:
    return int(res.scenario.name.rsplit("-", 1)[1])


def budgets(results: list[ScenarioResult], pi_reason: str | None) -> list[Budget]:
    """The budgets of issue 15, section 3 (ratios to pi in the same run; medians)."""
    r = _by_key(results)
    out: list[Budget] = []
    no_pi = f"NOT EVALUATED ({pi_reason or 'no pi figures'})"

    def med(key: str, cli: str, attr: str = "wall") -> float | None:
        return r[key].median(cli, attr) if key in r else None

    def extra(key: str, cli: str, name: str) -> float | None:
        return r[key].median_extra(cli, name) if key in r else None

    # (a) trivial prompt: wall <= 0.75x pi
    text_a = f"trivial prompt wall ≤ {A_LIMIT}× pi"
    a_pa, a_pi = med("a", PA), med("a", PI)
    if a_pa is None:
        out.append(Budget("a", text_a, "NOT EVALUATED (scenario a not run)" if "a" not in r else "NOT EVALUATED (no pi-actors figure)", ""))
    elif a_pi is None:
        out.append(Budget("a", text_a, no_pi, f"pi-actors {a_pa:.3f} s"))
    else:
        out.append(Budget("a", text_a, _met(a_pa <= A_LIMIT * a_pi),
                          f"pi-actors {a_pa:.3f} s, pi {a_pi:.3f} s: {a_pa / a_pi:.2f}× (limit {A_LIMIT * a_pi:.3f} s)"))

    # (b) 32 parallel calls <= 1.10 s above the trivial prompt
    text_b = f"32 parallel `sleep 1` calls ≤ {B_LIMIT:.2f} s above the trivial prompt"
    b_pa = med("b32", PA)
    if b_pa is not None and a_pa is not None:
        above = b_pa - a_pa
        pi_txt = ""
        b_pi = med("b32", PI)
        if a_pi is not None and b_pi is not None:
            pi_txt = f"; pi: {b_pi - a_pi:.3f} s above its trivial prompt"
        phase = [(cli, r["b32"].median_extra(cli, "first_to_second_request")) for cli in (PA, PI)]
        phase_txt = ", ".join(f"{cli} {v:.3f} s" for cli, v in phase if v is not None)
        if phase_txt:
            pi_txt += f" (tool phase, 1st → 2nd request: {phase_txt})"
        out.append(Budget("b", text_b, _met(above <= B_LIMIT), f"pi-actors {b_pa:.3f} s − {a_pa:.3f} s = {above:.3f} s{pi_txt}"))
    else:
        out.append(Budget("b", text_b, "NOT EVALUATED (scenario b32 or a not run)", ""))

    # (c) per-turn overhead <= 0.9x pi's, with durable session writes: the span from the first
    # to the last request, by the server's clock, divided by the number of turns. Start-up and
    # shutdown (and their noise, larger than pi's whole per-turn cost) stay out of it.
    text_c = f"per-turn overhead ≤ {C_LIMIT}× pi's (session written)"
    c_span = extra("c", PA, "request_span")
    if c_span is not None:
        n = _n(r["c"])
        text_c = f"per-turn overhead ≤ {C_LIMIT}× pi's ({n} turns, session written)"
        pa_turn = c_span / n
        pi_span = extra("c", PI, "request_span")
        if pi_span is not None:
            pi_turn = pi_span / n
            out.append(Budget("c", text_c, _met(pa_turn <= C_LIMIT * pi_turn),
                              f"pi-actors {pa_turn * 1000:.1f} ms/turn, pi {pi_turn * 1000:.1f} ms/turn: {pa_turn / pi_turn:.2f}×"
                              " (1st → last request by the server's clock, / turns)"))
        else:
            out.append(Budget("c", text_c, no_pi, f"pi-actors {pa_turn * 1000:.1f} ms/turn"))
    else:
        out.append(Budget("c", text_c, "NOT EVALUATED (scenario c not run)", ""))

    # (d) deltas per second >= 4x pi's: the reply's handling is the time from its request to
    # the exit, minus the same for the trivial prompt (whose reply is 3 deltas).
    text_d = f"deltas per second ≥ {D_LIMIT:g}× pi's"

    def handling(cli: str) -> float | None:
        d, a = extra("d", cli, "after_last_request"), extra("a", cli, "after_last_request")
        return None if d is None or a is None else max(1e-6, d - a)

    pa_handling = handling(PA)
    if pa_handling is not None:
        n = _n(r["d"])
        pa_rate = n / pa_handling
        pi_handling = handling(PI)
        if pi_handling is not None:
            pi_rate = n / pi_handling
            whole = f"{n / med('d', PA):,.0f}/s vs {n / med('d', PI):,.0f}/s"  # type: ignore[operator]
            out.append(Budget("d", text_d, _met(pa_rate >= D_LIMIT * pi_rate),
                              f"pi-actors {pa_rate:,.0f}/s, pi {pi_rate:,.0f}/s: {pa_rate / pi_rate:.2f}×"
                              f" (n / (request → exit of d − the same of a); whole runs: {whole})"))
        else:
            out.append(Budget("d", text_d, no_pi, f"pi-actors {pa_rate:,.0f}/s"))
    else:
        out.append(Budget("d", text_d, "NOT EVALUATED (scenario d or a not run)", ""))

    out += _long_budgets(r, no_pi)

    out.append(_rss_budget(results, no_pi))
    return out


def _rss_budget(results: list[ScenarioResult], no_pi: str) -> Budget:
    """Largest single process's peak RSS ≤ 0.5× pi's, in every scenario."""
    parts, worst_ok = [], True
    any_pi = False
    for res in results:
        pa_rss, pi_rss = res.median(PA, "max_rss_kb"), res.median(PI, "max_rss_kb")
        if pa_rss is None or pi_rss is None:
            continue
        any_pi = True
        worst_ok &= pa_rss <= RSS_LIMIT * pi_rss
        parts.append(f"({res.scenario.key}) {pa_rss / 1024:.0f} vs {pi_rss / 1024:.0f} MiB ({pa_rss / pi_rss:.2f}×)")
    text = f"peak RSS of the largest single process ≤ {RSS_LIMIT}× pi's (every scenario)"
    if any_pi:
        return Budget("rss", text, _met(worst_ok), "; ".join(parts))
    return Budget("rss", text, no_pi, "")


def _long_budgets(r: dict[str, ScenarioResult], no_pi: str) -> list[Budget]:
    """(f) and (g): per-turn overhead against pi, and how pi-actors' costs grow with the session."""
    out: list[Budget] = []
    text_f1 = f"long session: per-turn overhead ≤ {F_LIMIT}× pi's"
    text_f2 = f"long session: turns at the end within {F_GROWTH}× of turns 1–10"
    if "f" in r and r["f"].median_extra(PA, "turn_overhead") is not None:
        f = r["f"]
        n = _n(f)
        text_f1 = f"{n} turns: per-turn overhead ≤ {F_LIMIT}× pi's (session written)"
        text_f2 = f"{n} turns: turns {n - 10}–{n} within {F_GROWTH}× of turns 1–10"
        pa = f.median_extra(PA, "turn_overhead")
        pi = f.median_extra(PI, "turn_overhead")
        how = "(mean client time per turn — reply's end → next request, by the server's clock — median over runs)"
        if pi is not None and pa is not None:
            out.append(Budget("f", text_f1, _met(pa <= F_LIMIT * pi),
                              f"pi-actors {pa * 1000:.1f} ms/turn, pi {pi * 1000:.1f} ms/turn: {pa / pi:.2f}× {how}"))
        else:
            out.append(Budget("f", text_f1, no_pi, f"pi-actors {(pa or 0) * 1000:.1f} ms/turn {how}"))
        # Judged within each run (a session's late turns against its own early ones), then the
        # median over runs: the machine's speed can move between runs, and a ratio of medians
        # taken across runs would compare one run's late turns with another's early ones.
        early, late = f.median_extra(PA, "turns_early"), f.median_extra(PA, "turns_late")
        growth = f.median_ratio(PA, "turns_late", "turns_early")
        pi_early, pi_late = f.median_extra(PI, "turns_early"), f.median_extra(PI, "turns_late")
        pi_growth = f.median_ratio(PI, "turns_late", "turns_early")
        pi_txt = f"; pi {pi_early * 1000:.1f} → {pi_late * 1000:.1f} ms ({pi_growth:.2f}×)" if pi_early and pi_late and pi_growth else ""
        if early and late and growth is not None:
            out.append(Budget("f growth", text_f2, _met(growth <= F_GROWTH),
                              f"pi-actors {early * 1000:.1f} → {late * 1000:.1f} ms per turn: {growth:.2f}×{pi_txt}"
                              " (each run: median of turns 1–10 and of the last 11; the ratio taken within each run,"
                              " median over runs; the ms are medians over runs)"))
        else:
            out.append(Budget("f growth", text_f2, "NOT EVALUATED (no figures)", ""))
    else:
        out.append(Budget("f", text_f1, "NOT EVALUATED (scenario f not run)", ""))
        out.append(Budget("f growth", text_f2, "NOT EVALUATED (scenario f not run)", ""))

    text_g1 = f"rpc: prompt latency at prompt N−10 within {G_LATENCY}× of prompt 10"
    text_g2 = f"rpc: the session holder's RSS growth per prompt ≤ {G_RSS}× the session-file bytes per prompt"
    g = r.get("g")
    if g is not None and g.median_extra(PA, "prompt_early") is not None:
        n = _n(g)
        text_g1 = f"rpc, {n} prompts: latency at prompt {n - 10} within {G_LATENCY}× of prompt 10"
        early, late = g.median_extra(PA, "prompt_early"), g.median_extra(PA, "prompt_late")
        growth = g.median_ratio(PA, "prompt_late", "prompt_early")
        pi_early, pi_late = g.median_extra(PI, "prompt_early"), g.median_extra(PI, "prompt_late")
        pi_growth = g.median_ratio(PI, "prompt_late", "prompt_early")
        pi_txt = f"; pi {pi_early * 1000:.1f} → {pi_late * 1000:.1f} ms ({pi_growth:.2f}×)" if pi_early and pi_late and pi_growth else ""
        assert early is not None and late is not None and growth is not None
        out.append(Budget("g latency", text_g1, _met(growth <= G_LATENCY),
                          f"pi-actors {early * 1000:.1f} → {late * 1000:.1f} ms: {growth:.2f}×{pi_txt}"
                          f" (prompt written → its agent_end read; each run: medians of prompts 6–14 and {n - 14}–{n - 6},"
                          " the ratio taken within each run, median over runs; the ms are medians over runs)"))
        grow, size = g.median_extra(PA, "rss_growth_per_prompt"), g.median_extra(PA, "session_bytes_per_prompt")
        pi_grow, pi_size = g.median_extra(PI, "rss_growth_per_prompt"), g.median_extra(PI, "session_bytes_per_prompt")
        pi_txt = f"; pi's node process {pi_grow:,.0f} B per prompt, its session file {pi_size:,.0f} B" if pi_grow is not None and pi_size else ""
        assert grow is not None and size
        out.append(Budget("g memory", text_g2, _met(grow <= G_RSS * size),
                          f"pi-actors' coordinator {grow:,.0f} B per prompt, session file {size:,.0f} B per prompt: {grow / size:.2f}×{pi_txt}"
                          f" (VmRSS after prompt 20 and after prompt {n}, / {n - 20})"))
    else:
        out.append(Budget("g latency", text_g1, "NOT EVALUATED (scenario g not run)", ""))
        out.append(Budget("g memory", text_g2, "NOT EVALUATED (scenario g not run)", ""))
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


def micro_rows(results: list[MicroResult], previous: Previous | None = None) -> list[list[str]]:
    rows = []
    groups: dict[str, list[MicroResult]] = {}
    for m in results:
        groups.setdefault(m.group, []).append(m)
    for group, items in groups.items():
        base = next((m for m in items if m.baseline and m.name.startswith("baseline")), None)
        for m in items:
            val = format_figure(m.value, m.unit)
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
            row = [group, m.name, val, rel]
            if previous is not None:
                last = previous.micro.get((m.group, m.name))
                row += [last or "—", _change(val, last)]
            rows.append(row)
            group = ""
    return rows


def _change(this: str, last: str | None) -> str:
    """``this ÷ last`` of two printed figures of the same unit, or "—"."""
    a, b = figure_value(this), figure_value(last) if last else None
    if a is None or b is None or a[1] != b[1] or b[0] == 0 or math.isnan(a[0]):
        return "—"
    return f"{a[0] / b[0]:.2f}×"


def micro_table(results: list[MicroResult], markdown: bool = False, previous: Previous | None = None) -> str:
    """The micro-benchmarks; with ``previous``, each figure beside the last run's."""
    header = ["benchmark", "implementation", "figure", "vs baseline"]
    if previous is not None:
        header += [f"last run ({previous.label})", "this ÷ last"]
    return (_md_table if markdown else _text_table)(header, micro_rows(results, previous))


def dispatch_table(rows: list[tuple[str, float, str]], markdown: bool = False, previous: Previous | None = None) -> str:
    """Tool dispatch (``benchmarks.tool_dispatch``); with ``previous``, beside the last run's."""
    header = ["figure", "this run"]
    if previous is not None:
        header += [f"last run ({previous.label})", "this ÷ last"]
    out = []
    for name, value, unit in rows:
        val = format_figure(value, unit)
        row = [name, val]
        if previous is not None:
            last = previous.dispatch.get(name)
            row += [last or "—", _change(val, last)]
        out.append(row)
    return (_md_table if markdown else _text_table)(header, out)


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
