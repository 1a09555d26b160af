"""Issue 20: the web client in a real headless Chromium, against a real ``pi-actors serve --web``
process and the scripted model.

One browser for the module (Playwright driving Debian's ``/usr/bin/chromium``; nothing is
downloaded), one ``serve`` process (restarted once, on the same port and state directory), a
scripted LLM whose reply is chosen by the last user message. Each test loads the page few
times and checks many things a user sees. Waits are Playwright's (``expect``,
``wait_for_function``), never sleeps. Screenshots of the main views go to
``$PI_ACTORS_ARTIFACTS`` (else the module's tmp dir).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support.chromium import require_chromium

from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

playwright_sync = pytest.importorskip("playwright.sync_api", reason="the test extra installs playwright")
expect = playwright_sync.expect

CLI = str(Path(sys.executable).with_name("pi-actors"))
TIMEOUT_MS = 30_000

HOSTILE = (
    "Hostile reply.\n\n<script>window.__pwned = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__pwned = 'img'\">\n\n"
    "[click me](javascript:window.__pwned='link') and <a href=\"javascript:window.__pwned='a'\">raw link</a>\n\n"
    "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe>"
    "<svg onload=\"window.__pwned='svg'\"></svg>\n\n"
    "[safe](https://example.invalid/ok) end-of-hostile"
)
HOSTILE_TOOL = "printf '%s\\n' '<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script><b>bold?</b>'"


BURST_JS = """async () => {
  const t = new window.piActors.Transcript(document.createElement('div'), null);
  t.reset({messages: []});
  t.event({type: 'message_start', message: {role: 'assistant', content: []}});
  t.event({type: 'message_update', assistantMessageEvent:
    {type: 'text_start', contentIndex: 0, partial: {role: 'assistant', content: [{type: 'text', text: ''}]}}});
  for (let i = 0; i < 50000; i++) {
    t.event({type: 'message_update', assistantMessageEvent: {type: 'text_delta', contentIndex: 0, delta: 'abc '}});
  }
  while (t.root.textContent.length < 199990) await new Promise((r) => requestAnimationFrame(r));
  return {renders: t.stats.renders, deltas: t.stats.deltas, length: t.root.textContent.length};
}"""


#: Classic XSS vectors (OWASP's filter evasion cheat sheet and friends), each rendered as a
#: reply would be; none may leave anything active in the document.
XSS_VECTORS = [
    "<script>window.__pwned='s1'</script>",
    "<SCRIPT SRC=//evil.invalid/x.js></SCRIPT>",
    "<IMG SRC=\"javascript:window.__pwned='i1'\">",
    "<IMG SRC=# onmouseover=\"window.__pwned='i2'\">",
    "<img src=x onerror=window.__pwned='i3'>",
    "<svg/onload=window.__pwned='v1'>",
    "<body onload=window.__pwned='b1'>",
    "<iframe src=\"javascript:window.__pwned='f1'\"></iframe>",
    "<iframe srcdoc=\"<script>parent.__pwned='f2'</script>\"></iframe>",
    "<object data=\"javascript:window.__pwned='o1'\"></object>",
    "<embed src=\"javascript:window.__pwned='e1'\">",
    "<a href=\"jav&#x09;ascript:window.__pwned='a1'\">x</a>",
    "<a href=\" javascript:window.__pwned='a2'\">x</a>",
    "<a href=\"JaVaScRiPt:window.__pwned='a3'\">x</a>",
    "<a href=\"data:text/html,<script>alert(1)</script>\">x</a>",
    "[x](javascript:window.__pwned='m1')",
    "[x](JAVASCRIPT:window.__pwned='m2')",
    "[x](&#106;avascript:window.__pwned='m3')",
    "![x](javascript:window.__pwned='m4')",
    "![x](x \"onerror=window.__pwned='m5'\")",
    "<details open ontoggle=window.__pwned='d1'>",
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__pwned='mx'>",
    "<form action=\"javascript:window.__pwned='fm'\"><button>x</button></form>",
    "<input autofocus onfocus=window.__pwned='in'>",
    "<video><source onerror=\"window.__pwned='vd'\"></video>",
    "<style>@import 'javascript:alert(1)';</style>",
    "<div style=\"background:url(javascript:alert(1))\">x</div>",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\">",
    "<base href=\"javascript:alert(1)//\">",
    "<noscript><p title=\"</noscript><img src=x onerror=window.__pwned='ns'>\">",
    "```html\n<script>window.__pwned='code'</script>\n```",
    "<a href=\"mailto:x@example.invalid\">mail</a> <a href=\"https://example.invalid/\">web</a>",
]

XSS_JS = """async (vectors) => {
  const box = document.createElement('div');
  document.body.appendChild(box);
  for (const v of vectors) box.appendChild(window.piActors.markdown(v));
  await new Promise((r) => setTimeout(r, 0));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const active = [...box.querySelectorAll('*')].flatMap((el) => [...el.attributes]
    .filter((a) => /^on/i.test(a.name) || /^\\s*(javascript|data|vbscript):/i.test(a.value) || a.name === 'style' || a.name === 'srcdoc')
    .map((a) => `${el.tagName} ${a.name}=${a.value}`));
  const tags = [...box.querySelectorAll('script,iframe,object,embed,img,svg,math,form,input,style,meta,base,video,body')]
    .map((el) => el.tagName);
  const hrefs = [...box.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'));
  box.remove();
  return {active, tags, hrefs, pwned: window.__pwned === undefined ? null : String(window.__pwned)};
}"""


def _last_user_text(body: dict) -> tuple[str, str]:
    """(role of the last message, text of the last user message) of an OpenAI chat request."""
    messages = body.get("messages") or []
    last_role = messages[-1]["role"] if messages else ""
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            return last_role, c if isinstance(c, str) else "".join(p.get("text", "") for p in c or [])
    return last_role, ""


class _Scripted:
    """The scripted model in a thread of its own (these tests are synchronous: Playwright's
    sync API), its replies chosen from the request."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate
        self.server = ScriptedLLM(self.choose)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)
        self._thread.start()
        self._ready.wait(30)

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            self._token = trio.lowlevel.current_trio_token()
            await nursery.start(self.server.serve)
            self._ready.set()

    def stop(self) -> None:
        self._token.run_sync_soon(self._cancel.cancel)
        self._thread.join(30)

    def choose(self, body: dict) -> Reply:
        last_role, text = _last_user_text(body)
        if last_role == "tool":
            if body["messages"][-1].get("tool_call_id") == "call_write":
                edit = {"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}
                return Reply(tool_calls=[ScriptToolCall(id="call_edit", name="edit", arguments=edit)])
            return Reply(text=f"tool finished for: {text}", chunks=4)
        if "markdown please" in text:
            return Reply(
                text="Here is **bold** text.\n\n| col a | col b |\n|---|---|\n| 1 | 2 |\n\n```python\ndef f():\n    return 42\n```\n",
                thinking="let me think about tables", chunks=12,
            )
        if "run a tool" in text:
            return Reply(tool_calls=[ScriptToolCall(id="call_echo", name="bash", arguments={"command": "echo tool-output-marker"})])
        if "write and edit" in text:
            write = {"path": "notes.txt", "content": "alpha\nbeta\n"}
            return Reply(tool_calls=[ScriptToolCall(id="call_write", name="write", arguments=write)])
        if "wait for the gate" in text:
            command = f"while [ ! -e {self.gate} ]; do sleep 0.05; done; echo gate-open"
            return Reply(tool_calls=[ScriptToolCall(id="call_gate", name="bash", arguments={"command": command})])
        m = re.search(r"stream (\d+) deltas", text)
        if m:
            return Reply(text="abc " * int(m.group(1)), chunks=int(m.group(1)))
        if "hang" in text:
            return Reply(text="partial answer before the hang", hang_after_start=True)
        if "hostile" in text:
            return Reply(text=HOSTILE, tool_calls=[ScriptToolCall(id="call_hostile", name="bash", arguments={"command": HOSTILE_TOOL})])
        return Reply(text=f"echo: {text}", chunks=3)

    def texts_of_requests(self) -> list[str]:
        return [json.dumps(r["body"]) for r in self.server.requests]


class _Serve:
    """``pi-actors serve --web`` on 127.0.0.1; ``stop()`` kills it, ``start()`` starts it again
    on the same port and state directory."""

    def __init__(self, home: Path, work: Path, scripted: _Scripted) -> None:
        self.home, self.work = home, work
        (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
            "baseUrl": scripted.server.base_url_openai, "api": "openai-completions", "apiKey": "test-key",
            "models": [{"id": "scripted-model", "reasoning": True}, {"id": "scripted-other"}],
        }}}))
        self.env = {k: v for k, v in os.environ.items() if not (k.endswith("_API_KEY") or k.startswith(("ANTHROPIC_", "OPENAI_")))}
        self.env["PI_ACTORS_DIR"] = str(home)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.start()
        self.token = Path(self.token_file).read_text().strip()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [CLI, "serve", "--web", "--listen", f"127.0.0.1:{self.port}", "--model", "scripted/scripted-model",
             "--sandbox", "off", "--tools", "read,bash,edit,write"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env, cwd=self.work, text=True,
        )
        try:
            self._read_addresses()
        except BaseException:
            self.stop()  # never leave a server behind a failed start
            raise

    def _read_addresses(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.startswith("admin token file: "), first
        self.token_file = first.removeprefix("admin token file: ").strip()
        for line in self.proc.stdout:
            if line.startswith("listening: ") and "://" in line:
                self.port = int(re.match(r"listening: wss?://[^:]+:(\d+)/", line).group(1))  # type: ignore[union-attr]
                break
        self.url = f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)



@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("PI_ACTORS_ARTIFACTS")
    path = Path(where) / "web" if where else tmp_path_factory.mktemp("web-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Scripted]:
    s = _Scripted(tmp_path_factory.mktemp("gate") / "open")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, scripted: _Scripted) -> Iterator[_Serve]:
    base = tmp_path_factory.mktemp("serve")
    (base / "home").mkdir()
    (base / "work").mkdir()
    s = _Serve(base / "home", base / "work", scripted)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium (skipped when missing, a failure under CI=true), driven by Playwright
    over its own pipe; Playwright's bundled browsers are never downloaded or used."""
    executable = require_chromium()
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def context(browser: Any, served: _Serve, artifacts: Path) -> Iterator[Any]:
    """One browser profile (cookie jar), signed in through the page's form, shared by the tabs
    of these tests (each test works alone: xdist may run them on different workers)."""
    ctx = browser.new_context(viewport={"width": 1100, "height": 800})
    ctx.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = ctx.new_page()
    _sign_in(page, served, artifacts)
    page.close()
    yield ctx
    ctx.close()


def _watch(page: Any) -> list[str]:
    """Record dialogs (a payload calling alert() would open one) and page errors."""
    seen: list[str] = []

    def on_dialog(dialog: Any) -> None:
        seen.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda e: seen.append(f"pageerror: {e}"))
    return seen


def _sign_in(page: Any, served: _Serve, artifacts: Path) -> None:
    page.goto(served.url)
    expect(page.locator("#signin")).to_be_visible()
    page.screenshot(path=str(artifacts / "01-sign-in.png"))
    page.fill("#token", served.token)
    page.click("#signin-button")
    expect(page.locator("#sessions")).to_be_visible()
    assert served.token not in page.url


def _prompt(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def _idle(page: Any) -> None:
    expect(page.locator("body")).to_have_attribute("data-running", "no")


def test_sign_in_create_prompt_streams_markdown_tool_calls_and_hostile_output_stays_inert(context, served, scripted, artifacts):
    page = context.new_page()
    problems = _watch(page)
    page.goto(served.url)
    expect(page.locator("#sessions")).to_be_visible()  # signed in by the fixture, through the form
    # The token went into a form body, not into storage the page can read.
    assert page.evaluate("() => document.cookie") == ""
    stored = page.evaluate("() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert served.token not in stored

    page.fill("#create-cwd", "")
    page.select_option("#create-thinking", "low")
    page.click("#create-button")
    expect(page.locator("#session")).to_be_visible()
    session_id = page.get_attribute("body", "data-session-id")
    assert session_id
    expect(page.locator("#model-label")).to_contain_text("scripted/scripted-model")
    expect(page.locator("#model-label")).to_contain_text("thinking low")

    _prompt(page, "markdown please")
    reply = page.locator(".msg.assistant").last
    expect(reply.locator("table td").first).to_have_text("1")
    expect(reply.locator("strong")).to_have_text("bold")
    expect(reply.locator("pre code.hljs")).to_contain_text("return 42")
    assert reply.locator("pre code .hljs-keyword").count() > 0  # highlighted
    thinking = reply.locator("details.thinking")
    expect(thinking).to_contain_text("let me think")
    assert thinking.get_attribute("open") is None  # collapsed until clicked
    _idle(page)
    expect(page.locator("#usage")).to_contain_text("↑")
    page.screenshot(path=str(artifacts / "03-transcript-markdown.png"))

    _prompt(page, "run a tool")
    tool = page.locator(".tool").last
    expect(tool.locator(".tool-name")).to_have_text("bash")
    expect(tool.locator(".args.cmd")).to_contain_text("echo tool-output-marker")
    expect(tool.locator(".result pre.output")).to_contain_text("tool-output-marker")
    expect(page.locator(".msg.assistant").last).to_contain_text("tool finished for: run a tool")
    _idle(page)
    page.screenshot(path=str(artifacts / "04-tool-call.png"))

    _prompt(page, "write and edit a file")
    expect(page.locator(".msg.assistant").last).to_contain_text("tool finished for: write and edit a file")
    written = page.locator(".tool", has=page.locator(".tool-name", has_text="write"))
    expect(written.locator(".args details summary")).to_contain_text("written file (2 lines)")
    edited = page.locator(".tool", has=page.locator(".tool-name", has_text="edit"))
    expect(edited.locator(".result .diff-add")).to_contain_text("gamma")
    expect(edited.locator(".result .diff-del")).to_contain_text("beta")
    _idle(page)

    _prompt(page, "hostile please")
    expect(page.locator(".msg.assistant", has_text="end-of-hostile")).to_have_count(1)
    hostile_tool = page.locator(".tool").last
    expect(hostile_tool.locator(".result pre.output")).to_contain_text("<script>window.__pwned=2</script>")
    _idle(page)
    hostile = page.locator(".msg.assistant", has_text="end-of-hostile")
    # Nothing executed, nothing dangerous left in the DOM; the one safe link kept its href.
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("#transcript script, #transcript img, #transcript iframe, #transcript svg").count() == 0
    assert page.locator("#transcript [onerror], #transcript [onload]").count() == 0
    hrefs = page.eval_on_selector_all("#transcript a[href]", "els => els.map(e => e.getAttribute('href'))")
    assert hrefs == ["https://example.invalid/ok"], hrefs
    hostile.get_by_text("click me").click()
    hostile.get_by_text("raw link").click()
    assert page.evaluate("() => window.__pwned") is None
    assert hostile_tool.locator("b").count() == 0  # HTML in tool output is text
    page.screenshot(path=str(artifacts / "05-hostile-output.png"))
    assert problems == []

    # The sanitizer against classic XSS vectors: nothing active is left, only safe links.
    xss = page.evaluate(XSS_JS, XSS_VECTORS)
    assert xss == {"active": [], "tags": [], "hrefs": ["mailto:x@example.invalid", "https://example.invalid/"], "pwned": None}, xss

    # 50,000 deltas arriving at once are coalesced: a few renders, not one per delta.
    burst = page.evaluate(BURST_JS)
    assert burst["length"] >= len("abc " * 50_000) - 2, burst
    assert burst["renders"] <= 10, burst

    # The session list shows it, live, with this tab attached; detach goes back to it.
    page.click("#detach")
    row = page.locator(f"tr[data-session-id='{session_id}']")
    expect(row).to_contain_text("live")
    page.screenshot(path=str(artifacts / "02-session-list.png"))
    page.close()


def test_a_second_tab_follows_the_same_session_steer_during_a_run_and_abort(context, served, scripted, artifacts):
    first = context.new_page()
    first.goto(served.url)
    first.click("#create-button")
    expect(first.locator("#session")).to_be_visible()
    session_id = first.get_attribute("body", "data-session-id")

    second = context.new_page()
    second.goto(served.url)
    second.locator(f"tr[data-session-id='{session_id}'] button.attach").click()
    expect(second.locator("#session")).to_be_visible()

    _prompt(first, "please wait for the gate")
    for page in (first, second):
        expect(page.locator(".tool.running .args.cmd")).to_contain_text("while [")
        expect(page.locator("#abort")).to_be_visible()
    # Steer from the second tab while the first tab's run is going.
    expect(second.locator("#send")).to_have_text("Steer")
    second.fill("#prompt", "steering from tab two")
    second.click("#send")
    expect(first.locator("#queue")).to_contain_text("steering from tab two")
    scripted.gate.touch()
    for page in (first, second):
        expect(page.locator(".tool .result pre.output").last).to_contain_text("gate-open")
        expect(page.locator(".msg.user", has_text="steering from tab two")).to_have_count(1)
        expect(page.locator(".msg.assistant").last).to_contain_text("echo: steering from tab two")
        _idle(page)
    assert "steering from tab two" in scripted.texts_of_requests()[-1]
    second.screenshot(path=str(artifacts / "06-second-tab.png"))

    # Abort a reply that hangs, from the second tab; both see the aborted reply.
    _prompt(first, "hang now")
    expect(second.locator(".msg.assistant.streaming")).to_contain_text("partial answer before the hang")
    second.click("#abort")
    for page in (first, second):
        expect(page.locator(".msg.assistant .stop.aborted")).to_have_count(1)
        _idle(page)
    first.close()
    second.close()


def test_the_page_reconnects_after_serve_restarts_and_redraws_from_the_snapshot(context, served, scripted, artifacts):
    page = context.new_page()
    page.goto(served.url)
    page.click("#create-button")
    expect(page.locator("#session")).to_be_visible()
    session_id = page.get_attribute("body", "data-session-id")
    _prompt(page, "remember this line")
    expect(page.locator(".msg.assistant").last).to_contain_text("echo: remember this line")
    _idle(page)

    # A dropped connection (the server still up, the sign-in still good): the page reconnects,
    # attaches again and redraws the transcript from a new snapshot.
    snapshots = int(page.get_attribute("body", "data-snapshots") or "0")
    page.evaluate("() => window.piActors.state.conn.ws.close()")
    page.wait_for_function(f"() => Number(document.body.dataset.snapshots) > {snapshots}")
    expect(page.locator("#conn-status")).to_contain_text("connected as")
    expect(page.locator(".msg.user", has_text="remember this line")).to_have_count(1)
    expect(page.locator(".msg.assistant", has_text="echo: remember this line")).to_have_count(1)

    _prompt(page, "hang until the server dies")
    expect(page.locator(".msg.assistant.streaming")).to_contain_text("partial answer")
    served.stop()
    # The prompt in flight: its outcome is unknown, and it is not re-sent.
    expect(page.locator(".notice.unknown")).to_contain_text("outcome unknown")
    expect(page.locator("#conn-status")).to_contain_text("reconnecting in")
    served.start()
    # Sign-ins live in the server's memory: the restarted server asks for the token again,
    # and the tab comes back to its session, redrawn from a new snapshot.
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#signin-note")).to_contain_text("sign in again")
    page.fill("#token", served.token)
    page.click("#signin-button")
    expect(page.locator("#session")).to_be_visible()
    assert page.get_attribute("body", "data-session-id") == session_id
    expect(page.locator(".msg.user", has_text="remember this line")).to_have_count(1)
    expect(page.locator(".msg.assistant", has_text="echo: remember this line")).to_have_count(1)
    expect(page.locator("#conn-status")).to_contain_text("connected as")
    page.screenshot(path=str(artifacts / "07-after-restart.png"))
    # And the session works again.
    _idle(page)
    _prompt(page, "after the restart")
    expect(page.locator(".msg.assistant").last).to_contain_text("echo: after the restart")
    page.close()


class _EvilPage(http.server.BaseHTTPRequestHandler):
    """A page on another origin (same host, another port) that tries the server's WebSocket."""

    target = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = (
            "<!doctype html><title>evil</title><script>"
            f"window.result = 'pending'; const ws = new WebSocket('{self.target}', ['pi-actors.json']);"
            "ws.onopen = () => { window.result = 'open'; ws.send(JSON.stringify({type: 'hello', protocol: 'pi-actors',"
            " min_version: 1, max_version: 2, role: 'ui', name: 'evil', codecs: ['json']})); };"
            "ws.onmessage = (e) => { window.result = 'message: ' + e.data; };"
            "ws.onclose = () => { if (window.result === 'pending') window.result = 'refused'; };"
            "</script>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_page_from_another_origin_cannot_open_the_websocket_with_the_cookie(context, served):
    # The signed-in profile (its cookie is sent to 127.0.0.1 from any port: same site).
    handler = type("Evil", (_EvilPage,), {"target": f"ws://127.0.0.1:{served.port}/"})
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        # Cookies ignore ports and the two origins are the same site: the browser holds the
        # sign-in cookie for the evil page's origin too and sends it with its upgrade; only the
        # server's Origin check stands in the way.
        evil_url = f"http://127.0.0.1:{evil.server_address[1]}/"
        assert [c["sameSite"] for c in context.cookies(evil_url) if c["name"] == "pi_actors_session"] == ["Strict"]
        page = context.new_page()
        page.goto(evil_url)
        page.wait_for_function("() => window.result !== 'pending'")
        assert page.evaluate("() => window.result") == "refused"
        # The same profile on the server's own origin does connect.
        page.goto(served.url)
        expect(page.locator("#sessions")).to_be_visible()
        page.close()
    finally:
        evil.shutdown()


def test_the_page_has_no_inline_script_or_style_and_no_remote_origin():
    static = Path(__file__).parent.parent / "pi_actors" / "server" / "web" / "static"
    html = (static / "index.html").read_text()
    assert re.search(r"<script(?![^>]*\bsrc=)", html) is None
    assert " style=" not in html and "<style" not in html
    for f in static.rglob("*"):
        if f.suffix in (".html", ".js", ".css", ".mjs") and "vendor" not in f.parts:
            assert not re.search(r"(src|href)=[\"']?(https?:)?//", f.read_text()), f
            assert ".innerHTML" not in f.read_text() or f.name == "markdown.js", f
