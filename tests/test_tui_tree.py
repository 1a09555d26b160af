"""``/tree``, ``/fork``, the completion list and the session commands as a person sees them:
the real ``pi-actors`` in a tmux pane (``_tmux.Pane``) against the scripted model. The tree
view's logic without a terminal is in tests/test_tui_tree_view.py."""

from __future__ import annotations

import json
import shutil

import pytest

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptUsage

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def _entries(env) -> list[dict]:
    """Every entry of the newest session file under the test's home."""
    files = sorted(env.home.rglob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    assert files, "no session file was written"
    return [json.loads(line) for line in files[-1].read_text().splitlines()[1:]]


def _tree_part(screen: str) -> str:
    """The open tree selector (from its title to its counter line)."""
    return screen[screen.rindex("Session tree") :].split("Type to search:")[0]


async def _ask(pane, question: str, answer: str) -> None:
    await pane.type(question)
    await pane.keys("Enter")
    await pane.wait_for_answer(answer)


async def test_the_tree_indents_a_branch_at_the_first_message_marks_the_active_path_and_keeps_labels_and_branch_summaries(scripted, env, pane):
    scripted.script.extend(
        [Reply(text="First answer."), Reply(text="Second answer."), Reply(text="## Goal\nTried the first way."), Reply(text="Other answer.")]
    )
    await pane.start(session=True)
    await _ask(pane, "first question", "First answer.")
    await _ask(pane, "second question", "Second answer.")
    await pane.type("/tree")
    await pane.keys("Enter")
    screen = await pane.wait_for("Session tree", "(4/4)")
    tree = _tree_part(screen)
    assert "› • assistant: Second answer.  ← active" in tree  # the cursor starts on the active point
    assert "  • user: first question" in tree and "  • assistant: First answer." in tree  # the path is marked
    # Search: every word must occur; the counter follows.
    await pane.type("first q")
    screen = await pane.wait_for("(1/1)")
    assert "second question" not in _tree_part(screen)
    # Go back to the first message, summarizing the branch left.
    await pane.keys("Enter")
    await pane.wait_for("Summarize branch?", "Summarize with custom prompt")
    await pane.keys("Down", "Enter")
    screen = await pane.wait_until(lambda s: "Navigated to selected point" in s and "Branch summary (ctrl+o to expand)" in s)
    summaries = [e for e in _entries(env) if e["type"] == "branch_summary"]
    assert len(summaries) == 1 and "Tried the first way." in summaries[0]["summary"]
    assert "[branch]" in screen
    # The question is back in the editor with the cursor at its end.
    await pane.type(" again")
    await pane.wait_for("› first question again")
    await pane.keys("Enter")
    await pane.wait_for_answer("Other answer.")
    # The branch at the first message: both branches drawn, the active one first and marked.
    await pane.type("/tree")
    await pane.keys("Enter")
    screen = await pane.wait_for("Session tree", "← active")
    tree = _tree_part(screen)
    lines = [ln for ln in tree.splitlines() if "user:" in ln or "assistant:" in ln or "[branch summary]" in ln]
    assert lines[0].startswith("  • [branch summary]: "), tree
    assert [ln.rstrip() for ln in lines[1:]] == [
        "     • user: first question again",
        "›    • assistant: Other answer.  ← active",
        "  user: first question",
        "     assistant: First answer.",
        "     user: second question",
        "     assistant: Second answer.",
    ], tree
    # Shift+L labels the entry under the cursor; the label is a label entry of the session file.
    await pane.keys("Up")
    await pane.keys("L")
    await pane.wait_for("Label (empty to remove):")
    await pane.type("retry")
    await pane.keys("Enter")
    screen = await pane.wait_for("• [retry] user: first question again")
    target = next(e["id"] for e in _entries(env) if e["type"] == "message" and e["message"]["role"] == "user" and "again" in str(e["message"]["content"]))
    assert {"targetId": target, "label": "retry"}.items() <= next(e for e in _entries(env) if e["type"] == "label").items()
    # Filters: Ctrl+U shows user messages only; Ctrl+L the labelled entries.
    await pane.keys("C-u")
    screen = await pane.wait_for("(1/3) [user]")
    assert "assistant:" not in _tree_part(screen)
    await pane.keys("C-l")
    await pane.wait_for("(1/1) [labeled]")
    await pane.keys("Escape")
    await pane.wait_for_gone("Session tree")


async def test_fork_from_the_first_message_opens_the_new_session_without_error_and_the_footer_starts_at_zero(scripted, env, pane):
    scripted.script.extend([Reply(text="Answer.", usage=ScriptUsage(input=1200, output=345)), Reply(text="Answer two.", usage=ScriptUsage(input=40, output=5))])
    await pane.start(session=True)
    await _ask(pane, "first question", "↑1.2k")
    saved = env.work / "saved.jsonl"
    saved.write_text(sorted(env.home.rglob("*.jsonl"))[0].read_text())
    await pane.type("/fork")
    await pane.keys("Enter")
    await pane.wait_for("Fork from message", "first question")
    await pane.keys("Enter")
    screen = await pane.wait_for("Forked to:", "↑0 ↓0")
    assert "Cannot read session file" not in screen and "↑1.2k" not in screen
    await pane.type(" and more")  # the text is in the editor, the cursor at its end
    await pane.wait_for("› first question and more")
    await pane.keys("Enter")
    await pane.wait_for_answer("Answer two.", "↑40 ↓5")
    await pane.type("/new")
    await pane.keys("Enter")
    screen = await pane.wait_for("New session:", "↑0 ↓0")
    assert "↑40" not in screen
    # /import: a session file from elsewhere is copied into the session directory and resumed.
    await pane.type("/import saved.jsonl")
    await pane.keys("Enter")
    await pane.wait_for("Replace current session with saved.jsonl?")
    await pane.keys("Enter")
    await pane.wait_until(lambda s: "Session imported from: saved.jsonl" in s and "Answer." in s.split("Session imported from")[1] and "↑1.2k" in s)
    assert len(list(env.home.rglob("saved.jsonl"))) == 1


async def test_the_completion_list_sits_between_editor_and_footer_with_a_counter_and_the_session_commands_work(scripted, env, pane):
    scripted.script.append(Reply(text="Kept."))
    await pane.start(session=True)
    await pane.type("/")
    screen = await pane.wait_for("(1/")
    lines = screen.rstrip("\n").splitlines()
    counter = next(i for i, ln in enumerate(lines) if ln.strip().startswith("(1/"))
    rule = max(i for i, ln in enumerate(lines[:counter]) if ln.startswith("────"))
    assert counter - rule - 1 == 5, screen  # five rows (pi's autocompleteMaxVisible) below the editor
    assert lines[-1].rstrip().endswith("(scripted) scripted-model") and "/work" in lines[-2]  # the footer is still drawn below
    assert "→" not in screen.split("(1/")[0].splitlines()[-5]  # nothing chosen until Tab
    await pane.keys("Tab", "Tab")
    await pane.wait_for("(2/")  # the counter follows the selection
    await pane.keys("Escape", "C-c")
    await pane.wait_for_gone("(2/")
    # /thinking offers only what the (non-reasoning) scripted model has.
    await pane.type("/thinking")
    await pane.keys("Enter")
    screen = await pane.wait_for("Thinking level", "(1 items")
    assert "→ off  ✓" in screen and "minimal" not in screen
    await pane.keys("Escape")
    await pane.wait_for_gone("Thinking level")
    # /settings writes the global settings.json.
    await pane.type("/settings")
    await pane.keys("Enter")
    await pane.wait_for("Settings", "Tree filter mode")
    await pane.type("tree filter")
    await pane.keys("Enter")
    await pane.wait_for("user-only")
    await pane.type("user")
    await pane.keys("Enter")
    await pane.wait_for("Tree filter mode: user-only")
    assert json.loads((env.home / "settings.json").read_text())["treeFilterMode"] == "user-only"
    await pane.type("/reload")
    await pane.keys("Enter")
    await pane.wait_for("Reloaded settings, 0 prompt templates and ")
    await pane.type("/changelog")
    await pane.keys("Enter")
    await pane.wait_for("What's New", "no changelog entries found.")
    # /clone: the session so far continues in a new file.
    await _ask(pane, "keep this", "Kept.")
    first = sorted(env.home.rglob("*.jsonl"))
    await pane.type("/clone")
    await pane.keys("Enter")
    await pane.wait_for("Cloned to new session:")
    files = sorted(env.home.rglob("*.jsonl"))
    assert len(files) == len(first) + 1
    assert "keep this" in (set(files) - set(first)).pop().read_text()
