"""The web client against the terminal client: one long reply (50,000 text deltas by default)
from the scripted model, through a real ``pi-actors serve --web``.

Run: ``python -m benchmarks.web [--deltas 50000] [--rounds 3]`` (or ``python -m benchmarks
--only web``). Needs Debian's ``chromium`` and the ``playwright`` package (the test extra);
nothing is downloaded.

Each round prompts a new session for the same reply, whose frames the scripted server (its own
process) generated once, before any timing:

* ``web page`` — headless Chromium signed in to the page (pi_actors/server/web/static); timed
  in the page from the prompt's submit: *first paint* is the first animation frame that put
  reply text on screen, *done* the frame that rendered the final message. The page also
  reports how many times it rendered the streaming message (deltas are coalesced per
  animation frame) and the longest gap between two animation frames during the reply (how
  long the page was unresponsive at worst).
* ``terminal (attach -p)`` — ``pi-actors attach URL -p PROMPT`` against the same server:
  *first paint* is the first byte of the reply on its stdout, *done* its exit. Its times
  include what the page had done before its clock started: the process start, the
  connection, ``create`` and ``attach`` (``-p`` prints the answer when the run is over, so its
  first paint is close to its end).

deltas/s is the reply's deltas over *done*. The best round of each is reported (the median
too).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PIECE = "abc "
_CLI = str(Path(sys.executable).with_name("pi-actors"))


@dataclass
class Figure:
    """One client's rounds: seconds to first paint and to the end, and notes."""

    client: str
    first_paint: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def rate(self, deltas: int) -> float:
        return deltas / min(self.done) if self.done else 0.0


def _start_scripted(workdir: Path, deltas: int) -> tuple[subprocess.Popen, int]:
    script = workdir / "script.json"
    script.write_text(json.dumps({"replies": [{"text": PIECE * deltas, "chunks": deltas, "usage": {"input": 12}}], "cycle": True}))
    proc = subprocess.Popen([sys.executable, "-m", "pi_actors.testing.scripted_server", "--script", str(script)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _start_serve(workdir: Path, llm_port: int) -> tuple[subprocess.Popen, str, str]:
    home = workdir / "home"
    home.mkdir()
    (workdir / "work").mkdir()
    (home / "models.json").write_text(json.dumps({"providers": {"bench": {
        "baseUrl": f"http://127.0.0.1:{llm_port}/v1", "api": "openai-completions", "apiKey": "sk-bench",
        "models": [{"id": "bench-model"}]}}}))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PI_ACTORS_DIR"] = str(home)
    proc = subprocess.Popen([_CLI, "serve", "--web", "--listen", "127.0.0.1:0", "--model", "bench/bench-model",
                             "--sandbox", "off", "--tools", "read"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=workdir / "work")
    assert proc.stdout is not None
    token_file = proc.stdout.readline().removeprefix("admin token file: ").strip()
    url = ""
    for line in proc.stdout:
        if line.startswith("listening: ") and "://" in line:
            url = line.removeprefix("listening: ").split()[0]
            break
    return proc, token_file, url


_PROMPT_JS = """() => {
  const t = window.piActors.transcript;
  window.__bench = {t0: performance.now(), first: null, done: null, maxGap: 0, last: performance.now()};
  const b = window.__bench;
  const tick = (now) => {
    b.maxGap = Math.max(b.maxGap, now - b.last); b.last = now;
    if (b.first === null && t.stats.firstPaint !== null && t.stats.firstPaint >= b.t0) b.first = t.stats.firstPaint - b.t0;
    if (b.done === null) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  t.stats.firstPaint = null; t.stats.renders = 0; t.stats.deltas = 0;
  document.getElementById('prompt').value = 'stream please';
  document.getElementById('editor').requestSubmit();
}"""

_DONE_JS = """(n) => {
  const msgs = document.querySelectorAll('#transcript .msg.assistant:not(.streaming)');
  const last = msgs[msgs.length - 1];
  if (!last || document.body.dataset.running !== 'no' || last.textContent.length < n) return false;
  const b = window.__bench; b.done = performance.now() - b.t0;
  return true;
}"""


def web_rounds(url: str, token: str, deltas: int, rounds: int, fig: Figure) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True)
        page = browser.new_page()
        page.set_default_timeout(300_000)
        page.goto(url.replace("ws://", "http://"))
        page.fill("#token", token)
        page.click("#signin-button")
        page.wait_for_selector("#sessions:not([hidden])")
        for _ in range(rounds):
            page.click("#create-button")
            page.wait_for_selector("#session:not([hidden])")
            page.evaluate(_PROMPT_JS)
            page.wait_for_function(_DONE_JS, arg=len(PIECE * deltas) - 8, polling="raf")
            b = page.evaluate("() => ({...window.__bench, renders: window.piActors.transcript.stats.renders,"
                              " got: window.piActors.transcript.stats.deltas})")
            fig.first_paint.append((b["first"] or b["done"]) / 1000)
            fig.done.append(b["done"] / 1000)
            fig.notes.append(f"{b['got']} delta events in {b['renders']} renders, longest frame gap {b['maxGap']:.0f} ms")
            page.click("#detach")
            page.wait_for_selector("#sessions:not([hidden])")
        browser.close()


def terminal_rounds(url: str, token_file: str, deltas: int, rounds: int, fig: Figure, env: dict) -> None:
    for _ in range(rounds):
        t0 = time.perf_counter()
        proc = subprocess.Popen([_CLI, "attach", url, "--token-file", token_file, "-p", "stream please"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        assert proc.stdout is not None
        first = proc.stdout.read(1)
        t_first = time.perf_counter() - t0
        rest = proc.stdout.read()
        proc.wait()
        t_done = time.perf_counter() - t0
        if proc.returncode != 0 or len(first + rest) < len(PIECE * deltas) - 8:
            fig.notes.append(f"attach exited {proc.returncode} with {len(first + rest)} bytes")
            continue
        fig.first_paint.append(t_first)
        fig.done.append(t_done)


def run(deltas: int = 50_000, rounds: int = 3, out=print) -> list[Figure]:
    """Measure both clients; print a table with ``out``; return the figures."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        out("web: SKIPPED — the playwright package is missing (pip install -e .[test])")
        return []
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        out("web: SKIPPED — chromium is missing (scripts/install-system-packages)")
        return []
    web, term = Figure("web page (Chromium)"), Figure("terminal (attach -p)")
    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        workdir = Path(tmp)
        llm, port = _start_scripted(workdir, deltas)
        serve, token_file, url = _start_serve(workdir, port)
        try:
            token = Path(token_file).read_text().strip()
            env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
            env["PI_ACTORS_DIR"] = str(workdir / "home")
            web_rounds(url, token, deltas, rounds, web)
            terminal_rounds(url, token_file, deltas, rounds, term, env)
        finally:
            for proc in (serve, llm):
                proc.kill()
                proc.wait()
    out(f"one reply of {deltas:,} text deltas through `pi-actors serve --web`, {rounds} round(s), best (median):")
    out(f"  {'client':<24} {'first paint':>18} {'done':>18} {'deltas/s':>10}")
    for fig in (web, term):
        if not fig.done:
            out(f"  {fig.client:<24} FAILED: {'; '.join(fig.notes)}")
            continue
        fp = f"{min(fig.first_paint) * 1000:.0f} ms ({statistics.median(fig.first_paint) * 1000:.0f})"
        done = f"{min(fig.done):.2f} s ({statistics.median(fig.done):.2f})"
        out(f"  {fig.client:<24} {fp:>18} {done:>18} {fig.rate(deltas):>10,.0f}")
    for note in web.notes:
        out(f"  web: {note}")
    out("  (terminal: from the command's start, so process start, connect, create and attach included)")
    return [web, term]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.web", description=__doc__.split("\n\n")[0])
    p.add_argument("--deltas", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    figures = run(args.deltas, args.rounds)
    return 0 if all(f.done for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
