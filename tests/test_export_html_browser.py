"""The exported HTML page as a person sees it: a scripted session file (the shapes a run
writes, its bash and edit results from the real tools) exported through the real CLI with
``--export``, rendered by headless Chromium (one browser for the whole check). The session is
written by the test rather than by a ``-p`` run so that no provider or actor start (whose
handshake deadline a loaded machine can miss) stands between the test and the page.

The page is asserted from the rendered DOM — headings and a table from the Markdown, the
bash call with its output, the edit's diff with added and removed lines, thinking collapsed
until clicked, the session tree in the sidebar with its branch, search that hides rows as one
types, the branch switch by clicking a row, and the light/dark switch — and it must load
nothing from anywhere and run without script errors. A screenshot is written under the
test's tmp dir (its path is printed) for a person to look at.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import trio
from conftest import CLI
from support.chromium import chromium_page, require_chromium

from pi_actors.coding.tools import run_tool

MODEL = ("--model", "scripted/scripted-model")

ANSWER = """# Changes made

I replaced **beta** in `notes.txt`:

| file | before | after |
|------|--------|-------|
| notes.txt | beta | BETA |

<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> [click](javascript:window.pwned=3) [docs](https://example.org/docs)
"""


def _entry(parent_id: str | None, message: dict) -> dict:
    return {"type": "message", "id": uuid.uuid4().hex[:8], "parentId": parent_id, "timestamp": "2026-01-01T00:00:00.000Z", "message": message}


def _user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def _assistant(*content: dict) -> dict:
    usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}  # fmt: skip
    return {"role": "assistant", "content": list(content), "api": "openai-completions", "provider": "scripted",
            "model": "scripted-model", "usage": usage, "stopReason": "stop", "timestamp": 2}  # fmt: skip


async def _tool(work, call_id: str, name: str, args: dict) -> tuple[dict, dict]:
    """A tool call and its result, the result from running the real tool in ``work``."""
    done = await run_tool(name, args, cwd=str(work))
    result = {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": done["content"], "isError": False, "timestamp": 3}
    if done.get("details"):
        result["details"] = done["details"]
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": args}, result


async def _scripted_session(env):
    """A session file as a scripted run writes it — thinking, a bash call, an edit (both run
    for real in the work directory; the call ids repeat, as the scripted model's do), a
    Markdown answer — then two follow-ups on two branches: "Anything else?" and, beside it,
    the file's leaf "Say it in one line instead" (labelled "short"). Returns the file, the
    answer's id and the two follow-ups' ids."""
    (env.work / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    bash_call, bash_result = await _tool(env.work, "call_1", "bash", {"command": "cat notes.txt"})
    edit_call, edit_result = await _tool(env.work, "call_1", "edit", {"path": "notes.txt", "oldText": "beta", "newText": "BETA"})
    thinking = {"type": "thinking", "thinking": "The user wants beta replaced; first look at the file."}
    entries = [{"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                "provider": "scripted", "modelId": "scripted-model"}]  # fmt: skip
    for message in (
        _user("Replace beta in notes.txt"),
        _assistant(thinking, {"type": "text", "text": "Let me look."}, bash_call),
        bash_result,
        _assistant(edit_call),
        edit_result,
        _assistant({"type": "text", "text": ANSWER}),
    ):
        entries.append(_entry(entries[-1]["id"], message))
    answer = entries[-1]["id"]
    main = _entry(answer, _user("Anything else?"))
    other = _entry(answer, _user("Say it in one line instead"))
    entries += [main, _entry(main["id"], _assistant({"type": "text", "text": "Nothing else to do."})), other]
    entries.append(_entry(other["id"], _assistant({"type": "text", "text": "One line: *beta* became **BETA**."})))
    entries.append({"type": "label", "id": "l0", "parentId": entries[-1]["id"], "timestamp": "2026-01-01T00:00:01.000Z",
                    "targetId": other["id"], "label": "short"})  # fmt: skip
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": "2026-01-01T00:00:00.000Z", "cwd": str(env.work)}
    path = env.work / "2026-01-01T00-00-00-000Z_session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in (header, *entries)))
    return path, answer, (main["id"], other["id"])


async def test_the_exported_page_renders_markdown_tools_diff_thinking_and_a_searchable_tree_in_chromium(scripted, env, tmp_path):
    require_chromium()
    path, answer_id, (_, branch_user) = await _scripted_session(env)
    done = await env.run("--export", str(path))  # no output: pi's default name, in the current directory
    expected = env.work / f"pi-session-{path.stem}.html"
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == f"Exported to: {expected}" and expected.is_file()

    async with chromium_page(tmp_path) as page:
        await page.goto(expected.as_uri())
        dom = await page.js(
            """(() => {
              const shown = (e) => !!e && e.checkVisibility();
              const visible = (sel) => Array.from(document.querySelectorAll(sel)).filter(shown);
              const text = (sel) => visible(sel).map((e) => e.textContent.trim());
              return {
                h1: text("#messages h1"),
                headers: text("#messages table th"),
                cells: text("#messages table td"),
                bash: text(".tool-call[data-tool=bash] .tool-command"),
                bashOutput: text(".tool-call[data-tool=bash] .tool-output"),
                added: text(".tool-call[data-tool=edit] .diff-add"),
                removed: text(".tool-call[data-tool=edit] .diff-del"),
                thinkingSummary: text("details.thinking > summary"),
                thinkingTextShown: visible(".thinking-text").length,
                links: Array.from(document.querySelectorAll("#messages a")).map((a) => a.getAttribute("href")),
                scripts: document.querySelectorAll("script:not([type])").length,
                images: document.querySelectorAll("#messages img").length,
                pwned: window.pwned === undefined ? null : window.pwned,
                rows: visible("#tree .tree-row").map((r) => [r.dataset.id, r.textContent.trim(), getComputedStyle(r).paddingLeft]),
                current: text("#tree .tree-row.current"),
                messagesShown: visible("#messages .message").length,
                background: getComputedStyle(document.body).backgroundColor,
              };
            })()"""
        )
        assert dom["h1"] == ["Changes made"]
        assert dom["headers"] == ["file", "before", "after"] and dom["cells"] == ["notes.txt", "beta", "BETA"]
        assert dom["bash"] == ["$ cat notes.txt"] and dom["bashOutput"] == ["alpha\nbeta\ngamma"]
        assert [line.split()[-1] for line in dom["removed"]] == ["beta"] and [line.split()[-1] for line in dom["added"]] == ["BETA"]
        assert dom["thinkingSummary"] == ["Thinking"] and dom["thinkingTextShown"] == 0
        # Untrusted text stays text: no injected element ran, only the http(s) link is a link.
        assert dom["pwned"] is None and dom["scripts"] == 1 and dom["images"] == 0
        assert dom["links"] == ["https://example.org/docs"]
        # The tree: both branches listed, the second one (the file's leaf) shown and marked.
        row_text = {row_id: text for row_id, text, _ in dom["rows"]}
        assert any("Anything else?" in t for t in row_text.values()) and "[short]" in row_text[branch_user]
        padding = {row_id: float(pad[:-2]) for row_id, _, pad in dom["rows"]}
        assert padding[branch_user] > padding[answer_id]  # a branch point indents its children
        assert dom["current"] == ["assistant: One line: *beta* became **BETA**."]
        shown_text = await page.js("document.getElementById('messages').innerText")
        assert "Say it in one line instead" in shown_text and "Anything else?" not in shown_text
        shot = await page.screenshot(tmp_path / "export-page.png")
        print(f"screenshot of the exported page: {shot}")

        await page.click("details.thinking > summary")  # thinking opens on a click
        assert await page.js("document.querySelector('.thinking-text').checkVisibility()") is True

        await page.type_into("#tree-search", "anything")  # search hides the rows that do not match
        rows = await page.js("Array.from(document.querySelectorAll('#tree .tree-row')).filter((r) => !r.hidden).map((r) => r.textContent)")
        assert rows == ["user: Anything else?"], rows
        assert await page.js("document.getElementById('tree-status').textContent") == f"1 of {len(dom['rows'])} entries"

        await page.click("#tree .tree-row:not([hidden])")  # clicking the row shows its branch
        shown_text = await page.js("document.getElementById('messages').innerText")
        assert "Anything else?" in shown_text and "Say it in one line instead" not in shown_text and "Changes made" in shown_text

        await page.js("(() => { const s = document.getElementById('tree-search'); s.value = ''; s.dispatchEvent(new Event('input')); })()")
        await page.click(".filter-btn[data-filter=labeled]")  # only labelled entries
        rows = await page.js("Array.from(document.querySelectorAll('#tree .tree-row')).filter((r) => !r.hidden).map((r) => r.textContent)")
        assert rows == ["user: [short] Say it in one line instead"], rows

        await page.click("#theme-toggle")  # light/dark switch
        assert await page.js("getComputedStyle(document.body).backgroundColor") != dom["background"]
        await page.screenshot(tmp_path / "export-page-switched.png")

        requested = {e["params"]["request"]["url"].split(":", 1)[0] for e in page.events if e["method"] == "Network.requestWillBeSent"}
        assert requested <= {"file", "data"}, requested  # self-contained: nothing fetched from anywhere
        errors = [e for e in page.events if e["method"] == "Runtime.exceptionThrown"]
        errors += [e for e in page.events if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
        assert errors == []


async def test_slash_export_without_a_path_writes_where_export_flag_does(scripted, env):
    """pi's rule for both: ``pi-session-<session file name>.html`` in the current directory."""
    path, _, _ = await _scripted_session(env)
    env.sessions.mkdir()
    path = path.rename(env.sessions / path.name)  # the session file is not in the working directory
    proc = await trio.lowlevel.open_process(
        [CLI, *MODEL, "--mode", "rpc", "--session", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    await proc.stdin.send_all(b'{"id": "e", "type": "export_html"}\n')
    buffer = b""
    with trio.fail_after(30):
        while b'"id": "e"' not in buffer and b'"id":"e"' not in buffer:
            chunk = await proc.stdout.receive_some()
            assert chunk, buffer
            buffer += chunk
        await proc.stdin.aclose()
        await proc.wait()
    answer = next(json.loads(line) for line in buffer.splitlines() if b'"e"' in line)
    expected = env.work / f"pi-session-{path.stem}.html"
    assert answer["success"] is True and answer["data"]["path"] == str(expected), answer
    from_slash = expected.read_text()
    expected.unlink()
    done = await env.run("--export", str(path))
    assert done.returncode == 0 and expected.read_text() == from_slash
