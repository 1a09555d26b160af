"""Headless Chromium driven over the DevTools protocol, for tests that look at a page.

``async with chromium_page(tmp_path) as page:`` starts the system ``chromium`` once
(``--headless``, its own profile under ``tmp_path``, DevTools on a free 127.0.0.1 port read
from its start-up line), opens one tab and yields a :class:`Page`. Nothing is downloaded:
the browser is Debian's package (scripts/install-system-packages installs it) and the client
is trio-websocket, already a dependency. :func:`require_chromium` gives the path of the
binary, skipping the test when it is missing — except under CI (``CI=true``), where a
missing browser is a failure with the install hint.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

__all__ = ["Page", "chromium_page", "require_chromium"]

_LISTENING = re.compile(rb"DevTools listening on (ws://\S+)")


def require_chromium() -> str:
    """The Chromium binary; skip (outside CI) or fail (CI=true) when there is none."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    message = "chromium is not installed: run scripts/install-system-packages (Debian package 'chromium')"
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(message)
    pytest.skip(message)


class DevToolsError(Exception):
    """A DevTools command answered with an error, or a page script threw."""


class Page:
    """One tab: navigate, evaluate JavaScript, type, click, take screenshots; events seen on
    the page (requests, console errors, exceptions) are kept in ``events``."""

    def __init__(self, ws: Any, session_id: str) -> None:
        self._ws = ws
        self._session = session_id
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict]] = {}
        self.events: list[dict] = []
        self._event_seen = trio.Event()

    async def _read(self) -> None:
        while True:
            try:
                message = json.loads(await self._ws.get_message())
            except ConnectionClosed:
                return
            if "id" in message and message["id"] in self._waiting:
                await self._waiting.pop(message["id"]).send(message)
            elif "method" in message:
                self.events.append(message)
                self._event_seen.set()
                self._event_seen = trio.Event()

    async def send(self, method: str, params: dict | None = None, *, browser: bool = False) -> dict:
        """Run a DevTools command (on the tab unless ``browser``); its result."""
        ident = next(self._ids)
        send, receive = trio.open_memory_channel[dict](1)
        self._waiting[ident] = send
        command: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if not browser:
            command["sessionId"] = self._session
        await self._ws.send_message(json.dumps(command))
        answer = await receive.receive()
        if "error" in answer:
            raise DevToolsError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    async def wait_event(self, method: str, start: int = 0) -> dict:
        """The first event named ``method`` at index ``start`` or later, waiting for it."""
        while True:
            for event in self.events[start:]:
                if event["method"] == method:
                    return event
            await self._event_seen.wait()

    async def goto(self, url: str) -> None:
        mark = len(self.events)
        await self.send("Page.navigate", {"url": url})
        await self.wait_event("Page.loadEventFired", mark)

    async def js(self, expression: str) -> Any:
        """The value of ``expression`` (JSON-serialisable) evaluated in the page."""
        answer = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            raise DevToolsError(f"{expression!r} threw: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    async def click(self, selector: str) -> None:
        """A real left click in the middle of the first element matching ``selector``."""
        box = await self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})

    async def type_into(self, selector: str, text: str) -> None:
        """Focus ``selector`` and type ``text`` as keyboard input (fires ``input`` events)."""
        await self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.send("Input.insertText", {"text": text})

    async def screenshot(self, path: Path) -> Path:
        """The whole viewport as a PNG written to ``path``."""
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@asynccontextmanager
async def chromium_page(tmp_path: Path, width: int = 1280, height: int = 900) -> AsyncIterator[Page]:
    """One headless Chromium with one tab of ``width`` x ``height``; closed on exit."""
    binary = require_chromium()
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    argv = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        # No traffic anywhere: no pings or reports, and no host name resolves (the page is a file).
        "--no-pings", "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-default-apps",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--disable-features=Translate,OptimizationHints,MediaRouter",
        "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank",
    ]
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            with trio.fail_after(60):
                seen = b""
                assert process.stderr is not None
                while not (found := _LISTENING.search(seen)):
                    chunk = await process.stderr.receive_some(65536)
                    if not chunk:
                        raise RuntimeError(f"chromium exited before DevTools listened: {seen.decode(errors='replace')[-2000:]}")
                    seen += chunk
            nursery.start_soon(_drain, process.stderr)
            async with open_websocket_url(found.group(1).decode(), max_message_size=256 * 1024 * 1024) as ws:
                page = Page(ws, "")
                nursery.start_soon(page._read)
                target = await page.send("Target.createTarget", {"url": "about:blank"}, browser=True)
                attached = await page.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, browser=True)
                page._session = attached["sessionId"]
                for domain in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
                    await page.send(domain)
                await page.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
                yield page
                nursery.cancel_scope.cancel()
        finally:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def _drain(stream: Any) -> None:
    """Keep reading the browser's stderr so that it never blocks on a full pipe."""
    while await stream.receive_some(65536):
        pass
