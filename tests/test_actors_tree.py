"""The session tree through the actors: branching back, labels, forks, branch summaries."""

from __future__ import annotations

import json

import pytest
from support.prompts import send_prompt

from pi_actors.actors import open_local_runtime
from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.runtime import RemoteError
from pi_actors.testing.scripted_server import Reply


class _Quiet:
    def event(self, event: dict) -> None:
        pass


def _config(server, tmp_path) -> dict:
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    return runtime_config(
        model=model,
        thinking="off",
        tools=[],
        cwd=str(tmp_path),
        system_prompt="tree test",
        agent_dir=str(tmp_path),
        session={"sessionDir": str(tmp_path / "sessions"), "agentDir": str(tmp_path)},
        runtime_keys={"scripted": "k"},
        key_sources={},
    )


def _file_lines(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def _sent(server, index: int) -> list[tuple[str, str]]:
    out = []
    for m in server.requests[index]["body"]["messages"][1:]:
        content = m["content"]
        out.append((m["role"], content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)))
    return out


async def test_navigating_back_to_a_user_message_re_asks_it_on_a_new_branch(scripted, tmp_path):
    scripted.script += [Reply(text="A1"), Reply(text="A2"), Reply(text="B2")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "first", _Quiet())
        await send_prompt(coordinator, "second", _Quiet())
        tree = await coordinator.call("tree")
        second = next(e for e in tree["entries"] if e["type"] == "message" and e["message"]["content"] == [{"type": "text", "text": "second"}])
        moved = await coordinator.call("navigate", {"targetId": second["id"]})
        assert moved["editorText"] == "second"
        assert [m["role"] for m in (await coordinator.call("get_messages"))["messages"]] == ["user", "assistant"]
        await send_prompt(coordinator, "second, differently", _Quiet())
        path = (await coordinator.call("session"))["path"]
    assert _sent(scripted, 2) == [("user", "first"), ("assistant", "A1"), ("user", "second, differently")]
    lines = _file_lines(path)
    # Both branches stay in the file: two children hang off the first answer.
    first_answer = next(e for e in lines if e.get("message", {}).get("content") == [{"type": "text", "text": "A1"}])
    children = [e for e in lines[1:] if e["parentId"] == first_answer["id"]]
    assert sorted(c["message"]["content"][0]["text"] for c in children) == ["second", "second, differently"]


async def test_labels_mark_entries_and_the_latest_label_wins(scripted, tmp_path):
    scripted.script.append(Reply(text="answer"))
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "question", _Quiet())
        entries = (await coordinator.call("tree"))["entries"]
        target = entries[-1]["id"]
        await coordinator.call("label", {"targetId": target, "label": "checkpoint"})
        await coordinator.call("label", {"targetId": target, "label": "good answer"})
        assert (await coordinator.call("tree"))["labels"] == {target: "good answer"}
        with pytest.raises(RemoteError) as info:
            await coordinator.call("label", {"targetId": "nope1234", "label": "x"})
        assert info.value.code == "not_found"


async def test_fork_puts_the_history_before_a_user_message_into_a_new_file(scripted, tmp_path):
    scripted.script += [Reply(text="A1"), Reply(text="A2"), Reply(text="forked answer")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "first", _Quiet())
        await send_prompt(coordinator, "second", _Quiet())
        old_path = (await coordinator.call("session"))["path"]
        choices = (await coordinator.call("fork_messages"))["messages"]
        assert [c["text"] for c in choices] == ["first", "second"]
        forked = await coordinator.call("fork", {"entryId": choices[1]["entryId"]})
        assert forked["text"] == "second" and forked["path"] != old_path
        await send_prompt(coordinator, "another second", _Quiet())
    new_lines = _file_lines(forked["path"])
    assert new_lines[0]["parentSession"] == old_path
    users = [e["message"]["content"][0]["text"] for e in new_lines[1:] if e["type"] == "message" and e["message"]["role"] == "user"]
    assert users == ["first", "another second"]
    assert len(_file_lines(old_path)) == 1 + 2 + 4  # the original is untouched (header, initial entries, 4 messages)


async def test_a_branch_summary_recorded_when_leaving_a_branch_reaches_the_model(scripted, tmp_path):
    scripted.script += [Reply(text="explored"), Reply(text="back on track")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "explore something", _Quiet())
        first = next(e for e in (await coordinator.call("tree"))["entries"] if e["type"] == "message")
        await coordinator.call("navigate", {"targetId": first["id"], "summary": "Tried X; it did not work."})
        await send_prompt(coordinator, "try Y instead", _Quiet())
        path = (await coordinator.call("session"))["path"]
    sent = _sent(scripted, 1)
    assert sent[0][0] == "user" and "summary of a branch" in sent[0][1] and "Tried X" in sent[0][1]
    assert sent[-1] == ("user", "try Y instead")
    summary = next(e for e in _file_lines(path) if e["type"] == "branch_summary")
    # The first message hangs off the session's initial entries (pi's model_change and
    # thinking_level_change): the summary continues from there.
    assert summary["fromId"] == first["parentId"] and summary["parentId"] == first["parentId"]


async def test_leaving_a_branch_with_summarize_asks_the_model_for_a_branch_summary(scripted, tmp_path):
    scripted.script += [
        Reply(text="I tried the Rust rewrite."),
        Reply(text="## Goal\\nRewrite in Rust\\n\\n## Progress\\n### Done\\n- [x] tried it"),
        Reply(text="ok, back"),
    ]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "rewrite it in Rust", _Quiet())
        first = (await coordinator.call("tree"))["entries"][0]
        await coordinator.call("navigate", {"targetId": first["id"], "summarize": True, "customInstructions": "be brief"})
        await send_prompt(coordinator, "keep Python", _Quiet())
        path = (await coordinator.call("session"))["path"]
    summary_request = scripted.requests[1]["body"]["messages"]
    assert "context summarization assistant" in summary_request[0]["content"]
    prompt = summary_request[1]["content"] if isinstance(summary_request[1]["content"], str) else summary_request[1]["content"][0]["text"]
    # The abandoned part is what came after the re-asked message: the assistant's attempt.
    assert "[Assistant]: I tried the Rust rewrite." in prompt and "Additional focus: be brief" in prompt
    entry = next(e for e in _file_lines(path) if e["type"] == "branch_summary")
    assert entry["summary"].startswith("The user explored a different conversation branch before returning here.")
    assert "Rewrite in Rust" in entry["summary"]
    assert "summary of a branch" in _sent(scripted, 2)[0][1]
