"""The TUI's pure helpers: prompt templates, skills, @file attachments, footer numbers."""

from __future__ import annotations

from pi_actors.cli.tui.resources import (
    attach_files,
    context_percent,
    expand_skill,
    expand_template,
    format_tokens,
    load_skills,
    load_templates,
    usage_totals,
)


def test_a_prompt_template_expands_positional_and_all_arguments(tmp_path):
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    (agent / "prompts").mkdir(parents=True)
    (cwd / ".pi-actors" / "prompts").mkdir(parents=True)
    (agent / "prompts" / "review.md").write_text("---\ndescription: Review a file\n---\nReview $1 focusing on $2. All: $@. Rest: ${@:2}")
    (agent / "prompts" / "shared.md").write_text("user version")
    (cwd / ".pi-actors" / "prompts" / "shared.md").write_text("project version\nmore")
    templates = load_templates(str(agent), str(cwd))
    assert templates["review"].description == "Review a file (user)"
    assert templates["shared"].content == "project version\nmore"  # the project wins
    assert expand_template(templates["review"], 'a.py "error handling" x') == (
        "Review a.py focusing on error handling. All: a.py error handling x. Rest: error handling x"
    )
    assert expand_template(templates["review"], "") == "Review  focusing on . All: . Rest: "


def test_a_skill_needs_a_description_and_expands_to_pis_skill_block(tmp_path):
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    (agent / "skills" / "deploy").mkdir(parents=True)
    (agent / "skills" / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: Deploy the app\n---\nRun ./deploy.sh\n")
    (agent / "skills" / "nodesc.md").write_text("no frontmatter")
    cwd.mkdir()
    skills = load_skills(str(agent), str(cwd))
    assert list(skills) == ["deploy"]
    text = expand_skill(skills["deploy"], "to staging")
    assert text.startswith(f'<skill name="deploy" location="{agent}/skills/deploy/SKILL.md">\nReferences are relative to {agent}/skills/deploy.')
    assert text.endswith("Run ./deploy.sh\n</skill>\n\nto staging")


def test_at_paths_of_existing_files_are_attached_before_the_text(tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    text, names = attach_files("compare @a.txt with @missing.txt", str(tmp_path))
    assert names == [str(tmp_path / "a.txt")]
    assert text == f'<file name="{tmp_path / "a.txt"}">\nalpha\n</file>\ncompare @a.txt with @missing.txt'
    assert attach_files("mail me@example.com", str(tmp_path)) == ("mail me@example.com", [])


def test_footer_numbers_follow_pis_format():
    assert [format_tokens(n) for n in (999, 1234, 12_345, 999_499, 1_234_567, 12_345_678)] == ["999", "1.2k", "12k", "999k", "1.2M", "12M"]
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "usage": {"input": 1000, "output": 200, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.01}}},
        {"role": "assistant", "stopReason": "aborted", "usage": {"input": 5, "output": 0, "cost": {"total": 0.0}}},
    ]
    assert usage_totals(msgs) == {"input": 1005, "output": 200, "cacheRead": 0, "cacheWrite": 0, "cost": 0.01}
    assert context_percent(msgs, 10_000) == 12.0  # the last successful reply's context


def test_at_completion_finds_deeper_files_by_a_part_of_their_path(tmp_path):
    from pi_actors.cli.tui.widgets import _walk_matches

    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "widget_factory.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "widget_factory.py").write_text("")
    assert _walk_matches(str(tmp_path), "factory", 20) == ["src/pkg/widget_factory.py"]
