"""The system prompt, built as pi builds it: tools, guidelines, context files, date, cwd."""

from __future__ import annotations

from datetime import date

from pi_actors.coding.system_prompt import build_system_prompt


def test_context_files_come_from_the_agent_dir_then_root_down_to_cwd_agents_md_preferred(tmp_path):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "AGENTS.md").write_text("global rules")
    project = tmp_path / "proj"
    sub = project / "pkg"
    sub.mkdir(parents=True)
    (project / "CLAUDE.md").write_text("project rules")
    (sub / "AGENTS.md").write_text("package rules")
    (sub / "CLAUDE.md").write_text("ignored: AGENTS.md wins in the same directory")
    prompt = build_system_prompt(cwd=str(sub), tools=["read", "bash", "edit", "write"], agent_dir=str(agent), today=date(2026, 11, 30))
    assert "# Project Context" in prompt
    order = [prompt.index(f"## {p}") for p in (agent / "AGENTS.md", project / "CLAUDE.md", sub / "AGENTS.md")]
    assert order == sorted(order)
    assert "ignored" not in prompt
    assert prompt.endswith(f"\nCurrent date: 2026-11-30\nCurrent working directory: {sub}")


def test_default_prompt_lists_the_active_tools_and_pis_guidelines(tmp_path):
    prompt = build_system_prompt(cwd=str(tmp_path), tools=["read", "bash", "edit", "write"])
    # pi 0.73.1's snippets and guidelines (each tool's promptSnippet / promptGuidelines).
    assert prompt.split("Available tools:\n", 1)[1].split("\n\n", 1)[0] == "\n".join(
        [
            "- read: Read file contents",
            "- bash: Execute bash commands (ls, grep, find, etc.)",
            "- edit: Make precise file edits with exact text replacement, including multiple disjoint edits in one call",
            "- write: Create or overwrite files",
        ]
    )
    assert prompt.split("Guidelines:\n", 1)[1].split("\nCurrent date", 1)[0] == "\n".join(
        [
            "- Use bash for file operations like ls, rg, find",
            "- Use read to examine files instead of cat or sed.",
            "- Use edit for precise changes (edits[].oldText must match exactly)",
            "- When changing multiple separate locations in one file, use one edit call with multiple entries "
            "in edits[] instead of multiple edit calls",
            "- Each edits[].oldText is matched against the original file, not after earlier edits are applied. "
            "Do not emit overlapping or nested edits. Merge nearby changes into one edit.",
            "- Keep edits[].oldText as small as possible while still being unique in the file. "
            "Do not pad with large unchanged regions.",
            "- Use write only for new files or complete rewrites.",
            "- Be concise in your responses",
            "- Show file paths clearly when working with files",
        ]
    )
    with_grep = build_system_prompt(cwd=str(tmp_path), tools=["read", "bash", "grep"])
    assert "Prefer grep/find/ls tools over bash for file exploration" in with_grep


def test_custom_and_appended_prompts_may_be_files(tmp_path):
    custom = tmp_path / "SYSTEM.md"
    custom.write_text("You are terse.")
    prompt = build_system_prompt(cwd=str(tmp_path), tools=[], custom=str(custom), append="Always cite files.")
    assert prompt.startswith("You are terse.\n\nAlways cite files.")


def test_system_md_and_append_system_md_are_found_in_the_project_then_the_agent_dir(tmp_path):
    agent, work = tmp_path / "agent", tmp_path / "work"
    (work / ".pi-actors").mkdir(parents=True)
    agent.mkdir()
    (agent / "SYSTEM.md").write_text("Global base prompt.")
    (agent / "APPEND_SYSTEM.md").write_text("Global appendix.")
    prompt = build_system_prompt(cwd=str(work), tools=["read"], agent_dir=str(agent))
    assert prompt.startswith("Global base prompt.\n\nGlobal appendix.") and "Available tools:" not in prompt
    (work / ".pi-actors" / "SYSTEM.md").write_text("Project base prompt.")
    (work / ".pi-actors" / "APPEND_SYSTEM.md").write_text("Project appendix.")
    prompt = build_system_prompt(cwd=str(work), tools=["read"], agent_dir=str(agent))
    assert prompt.startswith("Project base prompt.\n\nProject appendix.") and "Global" not in prompt
    # the flags still win over both files
    flagged = build_system_prompt(cwd=str(work), tools=["read"], agent_dir=str(agent), custom="Flag base.", append="Flag tail.")
    assert flagged.startswith("Flag base.\n\nFlag tail.") and "Project" not in flagged
