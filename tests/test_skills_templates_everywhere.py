"""Skills and prompt templates in every mode, through the real CLI against the scripted model
(``scripted``/``env`` fixtures of conftest.py), plus fast tests of the shared code
(:mod:`pi_actors.coding.resources`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import trio
from conftest import CLI
from hypothesis import given
from hypothesis import strategies as st

from pi_actors.coding.resources import (
    ResourceOptions,
    expand_input,
    format_skills_for_prompt,
    load_resources,
    parse_frontmatter,
    split_arguments,
    substitute_arguments,
)
from pi_actors.coding.sandbox import SandboxPolicy
from pi_actors.coding.sandbox.bwrap import build_argv, shown_read_only
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _skill(root: Path, name: str, body: str = "") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: The {name} skill\n---\n{body or f'Steps of {name}.'}\n")
    return path


def _system(request: dict) -> str:
    return request["body"]["messages"][0]["content"]


def _user_texts(request: dict) -> list[str]:
    out = []
    for m in request["body"]["messages"]:
        if m["role"] == "user":
            content = m["content"]
            out.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
    return out


async def test_skills_from_every_location_reach_the_system_prompt_and_read_skill_and_template_expand(scripted, env, tmp_path):
    home = tmp_path / "home"
    (tmp_path / ".git").mkdir()  # the project's ancestors stop at the repository root
    located = {
        "agent-dir": _skill(env.home / "skills", "alpha", "Alpha secret steps."),  # ~/.pi-actors/skills
        "project": _skill(env.work / ".pi-actors" / "skills", "beta", "Beta steps, relative to here."),
        "pi-project": _skill(env.work / ".pi" / "skills", "zeta"),
        "ancestor": _skill(tmp_path / ".agents" / "skills", "gamma"),
        "pi-user": _skill(home / ".pi" / "agent" / "skills", "delta", "Delta from pi's dir."),
        "agents-user": _skill(home / ".agents" / "skills", "epsilon"),
        "flag": _skill(tmp_path / "extra", "eta"),
        "settings": _skill(tmp_path / "more", "theta"),
    }
    (env.home / "settings.json").write_text(json.dumps({"skills": [str(tmp_path / "more")]}))
    (env.work / ".pi-actors" / "prompts").mkdir(parents=True)
    (env.work / ".pi-actors" / "prompts" / "greet.md").write_text("---\ndescription: Greet someone\n---\nSay hello to $1 (all: $@).")
    env.env["HOME"] = str(home)
    scripted.script += [
        Reply(tool_calls=[
            ScriptToolCall(name="read", arguments={"path": str(located["agent-dir"])}),
            ScriptToolCall(name="read", arguments={"path": str(located["pi-user"])}),
        ]),
        Reply(text="Read them."),
        Reply(text="Hello Bob."),
    ]  # fmt: skip
    done = await env.run(
        "--model", "scripted/scripted-model", "--no-session", "--mode", "json", "--skill", str(tmp_path / "extra" / "eta"),
        "/skill:beta do it", "/greet Bob 'the builder'",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    system = _system(scripted.requests[0])
    block = system[system.index("<available_skills>") :]
    for name, path in [(p.parent.name, p) for p in located.values()]:
        assert f"    <name>{name}</name>\n    <description>The {name} skill</description>\n    <location>{path}</location>" in block
    assert "Use the read tool to load a skill's file when the task matches its description." in system
    assert system.index("</available_skills>") < system.index("\nCurrent date: ")
    # The model can read a skill in the (hidden) agent directory and in the (hidden) $HOME.
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    results = [(e["isError"], e["result"]["content"][0]["text"]) for e in events if e["type"] == "tool_execution_end"]
    assert [r[0] for r in results] == [False, False], results
    # (each end comes as its call finishes, pi's order: either may be first)
    assert sorted("Alpha secret steps." in text for _, text in results) == [False, True]
    assert sorted("Delta from pi's dir." in text for _, text in results) == [False, True]
    # /skill:beta became pi's skill block; /greet expanded with quoted arguments.
    first = _user_texts(scripted.requests[0])[0]
    beta = located["project"]
    assert first == (
        f'<skill name="beta" location="{beta}">\nReferences are relative to {beta.parent}.\n\n'
        "Beta steps, relative to here.\n</skill>\n\ndo it"
    )
    assert _user_texts(scripted.requests[2])[-1] == "Say hello to Bob (all: Bob the builder)."


async def test_greet_expands_over_rpc_and_get_commands_lists_templates_and_skills(scripted, env):
    (env.work / ".pi-actors" / "prompts").mkdir(parents=True)
    greet = env.work / ".pi-actors" / "prompts" / "greet.md"
    greet.write_text("---\ndescription: Greet someone\n---\nHello $1!")
    skill = _skill(env.home / "skills", "deploy")
    scripted.script.append(Reply(text="Hi."))
    commands = [{"id": "c", "type": "get_commands"}, {"id": "p", "type": "prompt", "message": "/greet Bob"}]
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--no-session", "--mode", "rpc"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    await proc.stdin.send_all("".join(json.dumps(c) + "\n" for c in commands).encode())
    buffer, lines = b"", []
    with trio.fail_after(60):
        while not any(json.loads(x).get("type") == "agent_end" for x in lines):
            chunk = await proc.stdout.receive_some()
            assert chunk, "the RPC process ended early"
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            lines += [x.decode() for x in complete if x.strip()]
        await proc.stdin.aclose()
        while await proc.stdout.receive_some():
            pass
        assert await proc.wait() == 0
    listed = next(json.loads(x) for x in lines if json.loads(x).get("command") == "get_commands")
    assert listed["success"] is True
    assert listed["data"]["commands"] == [
        {
            "name": "greet", "description": "Greet someone", "source": "prompt",
            "sourceInfo": {"path": str(greet), "source": "auto", "scope": "project", "origin": "top-level", "baseDir": str(greet.parent)},
        },
        {
            "name": "skill:deploy", "description": "The deploy skill", "source": "skill",
            "sourceInfo": {"path": str(skill), "source": "auto", "scope": "user", "origin": "top-level", "baseDir": str(skill.parent)},
        },
    ]  # fmt: skip
    assert _user_texts(scripted.requests[0]) == ["Hello Bob!"]


# -- the shared code, in process -----------------------------------------------------------------


def test_no_skills_keeps_explicit_paths_and_a_nameless_or_duplicate_skill_is_reported(tmp_path):
    agent, work = tmp_path / "agent", tmp_path / "work"
    _skill(agent / "skills", "one")
    _skill(work / ".pi-actors" / "skills", "one")  # the project's wins
    (agent / "skills" / "bare.md").write_text("no front matter at all")
    extra = _skill(tmp_path / "x", "two")
    found = load_resources(cwd=str(work), agent_dir=str(agent), home=str(tmp_path / "h"))
    assert [(s.name, s.scope) for s in found.skills] == [("one", "project"), ("one", "user")][:1]
    assert any("no description" in w for w in found.warnings) and any("already taken" in w for w in found.warnings)
    only = load_resources(
        cwd=str(work), agent_dir=str(agent), home=str(tmp_path / "h"),
        options=ResourceOptions(skill_paths=[str(extra.parent)], skills=False),
    )  # fmt: skip
    assert [(s.name, s.scope) for s in only.skills] == [("two", "temporary")]


def test_a_skill_the_model_may_not_invoke_is_left_out_of_the_prompt_and_text_is_xml_escaped(tmp_path):
    root = tmp_path / "skills"
    (root / "hidden").mkdir(parents=True)
    (root / "hidden" / "SKILL.md").write_text("---\ndescription: secret\ndisable-model-invocation: true\n---\nx")
    (root / "amp").mkdir()
    (root / "amp" / "SKILL.md").write_text('---\ndescription: "Use <b> & \'q\'"\n---\nx')
    found = load_resources(cwd=str(tmp_path), agent_dir=str(tmp_path), home=str(tmp_path / "h"))
    text = format_skills_for_prompt(found.skills)
    assert "hidden" not in text and "<description>Use &lt;b&gt; &amp; &apos;q&apos;</description>" in text
    assert text.startswith("\n\nThe following skills provide specialized instructions for specific tasks.\n")
    assert expand_input("/skill:hidden go", found.skills, []).endswith("x\n</skill>\n\ngo")  # still usable by hand


def test_template_arguments_follow_pis_syntax():
    args = split_arguments("a 'b c' \"d\" e")
    assert args == ["a", "b c", "d", "e"]
    assert substitute_arguments("$1|$2|$5|${@:2}|${@:2:2}|$@|$ARGUMENTS", args) == "a|b c||b c d e|b c d|a b c d e|a b c d e"
    assert substitute_arguments("$1", ["$2", "x"]) == "$2"  # no second substitution


@given(st.text(max_size=300))
def test_front_matter_parsing_never_raises_and_keeps_a_body(text):
    meta, body = parse_frontmatter(text)
    assert isinstance(meta, dict) and isinstance(body, str)
    if not text.startswith("---\n"):
        assert (meta, body) == ({}, text)


@given(st.text(max_size=200), st.lists(st.text(max_size=20), max_size=5))
def test_template_substitution_never_raises_on_hostile_text(content, args):
    assert isinstance(substitute_arguments(content, args), str)
    assert isinstance(split_arguments(content), list)


def test_block_scalars_and_quotes_in_front_matter():
    meta, body = parse_frontmatter("---\nname: x\ndescription: >\n  folded\n  text\nlit: |\n  a\n  b\nq: 'it''s'\n---\n\nbody\n")
    assert meta == {"name": "x", "description": "folded text", "lit": "a\nb", "q": "it's"} and body == "body\n"


def test_skill_directories_are_shown_to_tools_but_never_a_credential_store_or_what_holds_the_agent_dir(tmp_path):
    home, work, agent = tmp_path / "home", tmp_path / "work", tmp_path / "home" / ".pi-actors"
    skill = _skill(agent / "skills", "ok").parent
    pi_skill = _skill(home / ".pi" / "agent" / "skills", "pi-ok").parent
    ssh_skill = _skill(home / ".ssh", "keys").parent
    work.mkdir()
    policy = SandboxPolicy(
        workspace=str(work), home=str(home), hidden=(str(agent),),
        read_only=(str(skill), str(pi_skill), str(ssh_skill), str(home), str(work / "inside"), "relative/path"),
    )  # fmt: skip
    assert shown_read_only(policy, str(work)) == [str(skill), str(pi_skill)]
    argv = build_argv(policy, ["true"])
    assert argv.index(str(skill)) > argv.index(str(home))  # bound after $HOME is masked


def test_a_skill_added_by_the_project_settings_is_usable_but_not_shown_to_tools(tmp_path):
    listed = _skill(tmp_path / "elsewhere", "outside")
    own = _skill(tmp_path / "agent" / "skills", "mine")
    found = load_resources(
        cwd=str(tmp_path / "work"), agent_dir=str(tmp_path / "agent"), home=str(tmp_path / "h"),
        settings={"skills": [str(tmp_path / "elsewhere")]},
        options=ResourceOptions(untrusted_paths=[str(tmp_path / "elsewhere")]),
    )  # fmt: skip
    assert [s.name for s in found.skills] == ["mine", "outside"]
    assert found.readable == [str(own.parent)] and str(listed.parent) not in found.readable
