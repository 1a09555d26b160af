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
    assert "- read: Read file contents" in prompt and "- bash: Execute bash commands (ls, grep, find, etc.)" in prompt
    assert "- Use read to examine files before editing. You must use this tool instead of cat or sed." in prompt
    assert "- Use bash for file operations like ls, rg, find" in prompt
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
