"""grep, find and ls as the model sees them (pi spec §1.8–§1.10), on the wheel's ripgrep."""

from __future__ import annotations

import os
import sys

import pytest

from pi_actors.coding.tools import ToolError, run_tool
from pi_actors.coding.tools.find import glob_to_regex
from pi_actors.coding.tools.rg import rg_path


async def call(name, cwd, **args):
    return await run_tool(name, args, cwd=str(cwd))


def text_of(result):
    (block,) = result["content"]
    return block["text"]


@pytest.fixture
def tree(tmp_path):
    """A small project: sources, a .gitignore'd directory, a hidden file."""
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "build").mkdir()
    (tmp_path / "src" / "a.ts").write_text("const alpha = 1;\nconst beta = 2;\n")
    (tmp_path / "src" / "sub" / "b.spec.ts").write_text("describe('beta')\n")
    (tmp_path / "build" / "out.ts").write_text("const beta = 'built';\n")
    (tmp_path / ".hidden.ts").write_text("beta hidden\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "README.md").write_text("# readme\n")
    return tmp_path


def test_ripgrep_comes_from_the_ripgrep_wheel_next_to_the_interpreter():
    assert rg_path() == os.path.join(os.path.dirname(sys.executable), "rg")


# -- grep ----------------------------------------------------------------------------------


async def test_grep_in_a_single_file_names_it_by_basename_with_line_numbers(tree):
    result = await call("grep", tree, pattern="beta", path="src/a.ts")
    assert text_of(result) == "a.ts:2: const beta = 2;"
    assert result["details"] is None


async def test_grep_shows_context_lines_with_dashes(tree):
    result = await call("grep", tree, pattern="alpha", path="src", context=1)
    assert text_of(result) == "a.ts:1: const alpha = 1;\na.ts-2- const beta = 2;"


async def test_grep_searches_hidden_files_and_reports_paths_relative_to_the_directory(tree):
    result = await call("grep", tree, pattern="beta", glob="*.ts")
    lines = sorted(text_of(result).split("\n"))
    # Outside a git repository ripgrep does not apply .gitignore (as in pi), so build/ shows.
    assert lines == [
        ".hidden.ts:1: beta hidden",
        "build/out.ts:1: const beta = 'built';",
        "src/a.ts:2: const beta = 2;",
        "src/sub/b.spec.ts:1: describe('beta')",
    ]


async def test_grep_stops_at_the_match_limit_and_says_so(tree):
    (tree / "many.txt").write_text("".join(f"hit {i}\n" for i in range(50)))
    result = await call("grep", tree, pattern="hit", path="many.txt", limit=5)
    text = text_of(result)
    assert text.split("\n\n")[0].count("\n") == 4
    assert text.endswith("\n\n[5 matches limit reached. Use limit=10 for more, or refine pattern]")
    assert result["details"] == {"matchLimitReached": 5}


async def test_grep_cuts_long_lines_and_says_so(tree):
    (tree / "long.txt").write_text("x" * 600 + " needle\n")
    result = await call("grep", tree, pattern="needle", path="long.txt")
    text = text_of(result)
    assert text.startswith("long.txt:1: " + "x" * 500 + "... [truncated]")
    assert text.endswith("[Some lines truncated to 500 chars. Use read tool to see full lines]")
    assert result["details"] == {"linesTruncated": True}


async def test_grep_without_matches_says_so(tree):
    assert text_of(await call("grep", tree, pattern="nothing-like-this")) == "No matches found"


async def test_grep_with_an_invalid_regex_is_a_clear_error(tree):
    with pytest.raises(ToolError) as info:
        await call("grep", tree, pattern="(unclosed")
    assert "regex parse error" in info.value.message and "unclosed group" in info.value.message


async def test_grep_literal_and_ignore_case(tree):
    (tree / "lit.txt").write_text("a.b\naxb\nA.B\n")
    result = await call("grep", tree, pattern="a.b", path="lit.txt", literal=True, ignoreCase=True)
    assert text_of(result) == "lit.txt:1: a.b\nlit.txt:3: A.B"


async def test_grep_in_a_missing_path_is_path_not_found(tree):
    with pytest.raises(ToolError) as info:
        await call("grep", tree, pattern="x", path="nope")
    assert info.value.message == f"Path not found: {tree / 'nope'}"


# -- find ----------------------------------------------------------------------------------


async def test_find_matches_names_anywhere_and_honours_gitignore_outside_git(tree):
    result = await call("find", tree, pattern="*.ts")
    assert text_of(result) == ".hidden.ts\nsrc/a.ts\nsrc/sub/b.spec.ts"
    assert result["details"] is None


async def test_find_matches_a_pattern_with_a_slash_against_the_relative_path(tree):
    assert text_of(await call("find", tree, pattern="src/**/*.spec.ts")) == "src/sub/b.spec.ts"
    assert text_of(await call("find", tree, pattern="**/*.md")) == "README.md"


async def test_find_lists_matching_directories_with_a_trailing_slash(tree):
    assert text_of(await call("find", tree, pattern="su*")) == "src/sub/"


async def test_find_stops_at_the_limit_and_says_so(tree):
    result = await call("find", tree, pattern="*", path="src", limit=2)
    assert text_of(result) == "a.ts\nsub/\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
    assert result["details"] == {"resultLimitReached": 2}


async def test_find_without_matches_and_in_a_missing_directory(tree):
    assert text_of(await call("find", tree, pattern="*.rs")) == "No files found matching pattern"
    with pytest.raises(ToolError) as info:
        await call("find", tree, pattern="*", path="missing")
    assert info.value.message == f"Path not found: {tree / 'missing'}"


def test_glob_translation_covers_stars_classes_and_braces():
    assert glob_to_regex("*.{ts,js}").match("a.js")
    assert not glob_to_regex("*.ts").match("a/b.ts")
    assert glob_to_regex("**/b.ts").match("b.ts") and glob_to_regex("**/b.ts").match("x/y/b.ts")
    assert glob_to_regex("src/**").match("src/x/y")
    assert glob_to_regex("[!a]?.txt").match("bc.txt") and not glob_to_regex("[!a]?.txt").match("ac.txt")


# -- ls ------------------------------------------------------------------------------------


async def test_ls_lists_dotfiles_sorted_case_insensitively_with_slashes_for_directories(tree):
    (tree / "Zeta.txt").write_text("")
    (tree / "alpha.txt").write_text("")
    os.symlink(tree / "nowhere", tree / "dangling")
    result = await call("ls", tree)
    assert text_of(result) == ".gitignore\n.hidden.ts\nalpha.txt\nbuild/\nREADME.md\nsrc/\nZeta.txt"


async def test_ls_stops_at_the_limit_and_says_so(tree):
    result = await call("ls", tree, limit=2)
    assert text_of(result) == ".gitignore\n.hidden.ts\n\n[2 entries limit reached. Use limit=4 for more]"
    assert result["details"] == {"entryLimitReached": 2}


async def test_ls_errors_for_missing_paths_and_files_and_says_when_empty(tree):
    with pytest.raises(ToolError, match=f"^Path not found: {tree / 'nope'}$"):
        await call("ls", tree, path="nope")
    with pytest.raises(ToolError, match=f"^Not a directory: {tree / 'README.md'}$"):
        await call("ls", tree, path="README.md")
    (tree / "empty").mkdir()
    assert text_of(await call("ls", tree, path="empty")) == "(empty directory)"


async def test_ls_cuts_the_output_at_50kb(tree):
    big = tree / "big"
    big.mkdir()
    for i in range(450):
        (big / (f"{i:03d}-" + "n" * 120)).write_text("")
    result = await call("ls", tree, path="big")
    text = text_of(result)
    assert text.endswith("\n\n[50.0KB limit reached]")
    assert result["details"]["truncation"]["truncatedBy"] == "bytes"
