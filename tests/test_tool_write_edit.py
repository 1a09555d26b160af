"""The write and edit tools as the model sees them (pi spec §1.5, §1.6): texts, diffs, bad input."""

from __future__ import annotations

import os

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.coding.tools import DEFAULT_TOOLS, TOOL_SPECS, ToolError, run_tool
from pi_actors.coding.tools.edit_diff import generate_diff_string, normalize_for_fuzzy_match


async def call(name, cwd, **args):
    return await run_tool(name, args, cwd=str(cwd))


def text_of(result):
    (block,) = result["content"]
    return block["text"]


def snapshot(directory) -> dict[str, bytes]:
    """Every file below ``directory`` with its bytes (to show that nothing changed)."""
    files = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, directory)] = handle.read()
    return files


def test_the_default_tools_are_read_bash_edit_write_and_all_seven_exist():
    assert DEFAULT_TOOLS == ("read", "bash", "edit", "write")
    assert set(TOOL_SPECS) == {"read", "bash", "edit", "write", "grep", "find", "ls"}
    assert TOOL_SPECS["edit"].parameters["required"] == ["path", "edits"]


# -- write ---------------------------------------------------------------------------------


async def test_write_creates_parent_directories_and_reports_the_javascript_length(tmp_path):
    result = await call("write", tmp_path, path="a/b/c.txt", content="h\u00e9llo \U0001f600")
    # "héllo 😀" is 8 UTF-16 code units (the emoji counts twice), 11 UTF-8 bytes.
    assert text_of(result) == "Successfully wrote 8 bytes to a/b/c.txt"
    assert result["details"] is None
    assert (tmp_path / "a/b/c.txt").read_bytes() == "h\u00e9llo \U0001f600".encode()


async def test_write_overwrites_an_existing_file(tmp_path):
    (tmp_path / "f.txt").write_text("old content that is longer")
    await call("write", tmp_path, path="f.txt", content="new")
    assert (tmp_path / "f.txt").read_text() == "new"


async def test_write_into_a_directory_path_is_a_node_style_error_and_changes_nothing(tmp_path):
    (tmp_path / "d").mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(ToolError) as info:
        await call("write", tmp_path, path="d", content="x")
    assert info.value.message == f"EISDIR: illegal operation on a directory, open '{tmp_path / 'd'}'"
    assert snapshot(tmp_path) == before


async def test_write_under_a_file_used_as_directory_fails_cleanly(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ToolError, match="^(ENOTDIR|EEXIST): .*mkdir"):
        await call("write", tmp_path, path="file/child.txt", content="y")
    assert (tmp_path / "file").read_text() == "x"


async def test_write_requires_string_arguments(tmp_path):
    with pytest.raises(ToolError, match='Validation failed for tool "write":\n  - content: must be string'):
        await call("write", tmp_path, path="x.txt", content=5)
    assert not (tmp_path / "x.txt").exists()


# -- edit ----------------------------------------------------------------------------------


async def test_edit_replaces_unique_text_and_returns_a_numbered_diff(tmp_path):
    (tmp_path / "f.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    result = await call("edit", tmp_path, path="f.py", oldText="line 10\n", newText="line ten\nline 10.5\n")
    assert text_of(result) == "Successfully replaced 1 block(s) in f.py."
    assert result["details"] == {
        "diff": "\n".join(
            [
                "    ...",
                "  6 line 6",
                "  7 line 7",
                "  8 line 8",
                "  9 line 9",
                "-10 line 10",
                "+10 line ten",
                "+11 line 10.5",
                " 11 line 11",
                " 12 line 12",
                " 13 line 13",
                " 14 line 14",
                "    ...",
            ]
        ),
        "firstChangedLine": 10,
    }
    assert "line ten\nline 10.5\nline 11\n" in (tmp_path / "f.py").read_text()


async def test_edit_keeps_the_bom_and_crlf_line_endings(tmp_path):
    path = tmp_path / "win.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result = await call("edit", tmp_path, path="win.txt", oldText="two\nthree", newText="2\n3\n4")
    assert path.read_bytes() == b"\xef\xbb\xbfone\r\n2\r\n3\r\n4\r\n"
    assert result["details"]["diff"] == "\n".join([" 1 one", "-2 two", "-3 three", "+2 2", "+3 3", "+4 4"])


async def test_edit_falls_back_to_the_fuzzy_match_and_rewrites_the_file_normalized(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("say \u201chello\u201d   \nkeep\u00a0this\n")
    # The model typed ASCII quotes and no trailing spaces.
    await call("edit", tmp_path, path="q.txt", oldText='say "hello"', newText='say "bye"')
    assert path.read_text() == 'say "bye"\nkeep this\n'


async def test_edit_refuses_text_that_occurs_more_than_once(tmp_path):
    (tmp_path / "dup.txt").write_text("a\nsame\nb\nsame\n")
    before = snapshot(tmp_path)
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="dup.txt", oldText="same", newText="other")
    assert info.value.message == (
        "Found 2 occurrences of the text in dup.txt. The text must be unique. "
        "Please provide more context to make it unique."
    )
    assert snapshot(tmp_path) == before


async def test_edit_reports_text_that_is_not_there(tmp_path):
    (tmp_path / "f.txt").write_text("abc\n")
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="f.txt", oldText="xyz", newText="q")
    assert info.value.message == (
        "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines."
    )


async def test_edit_refuses_a_replacement_that_changes_nothing(tmp_path):
    (tmp_path / "f.txt").write_text("abc\n")
    with pytest.raises(ToolError, match=r"^No changes made to f.txt. The replacement produced identical content"):
        await call("edit", tmp_path, path="f.txt", oldText="abc", newText="abc")


async def test_edit_of_a_missing_file_is_file_not_found_and_creates_nothing(tmp_path):
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="missing.txt", oldText="a", newText="b")
    assert info.value.message == "File not found: missing.txt"
    assert snapshot(tmp_path) == {}


async def test_edit_of_a_binary_file_is_refused_and_the_file_is_untouched(tmp_path):
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    (tmp_path / "img.png").write_bytes(data)
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="img.png", oldText="IHDR", newText="XXXX")
    assert info.value.message == "Cannot edit img.png: it is a binary file"
    assert (tmp_path / "img.png").read_bytes() == data


async def test_edit_of_a_non_utf8_file_is_refused_and_the_file_is_untouched(tmp_path):
    data = "caf\u00e9 cr\u00e8me\n".encode("latin-1")
    (tmp_path / "latin1.txt").write_bytes(data)
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="latin1.txt", oldText="caf", newText="tea")
    assert info.value.message.startswith("Cannot edit latin1.txt: it is not valid UTF-8 text (byte 0xe9 at offset 3)")
    assert (tmp_path / "latin1.txt").read_bytes() == data


async def test_edit_with_an_empty_old_text_is_refused_with_pis_text(tmp_path):
    (tmp_path / "f.txt").write_text("abcd")
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="f.txt", oldText="", newText="x")
    assert info.value.message == "oldText must not be empty in f.txt."
    with pytest.raises(ToolError) as info:
        await call("edit", tmp_path, path="f.txt", edits=[{"oldText": "a", "newText": "A"}, {"oldText": "", "newText": "x"}])
    assert info.value.message == "edits[1].oldText must not be empty in f.txt."
    assert (tmp_path / "f.txt").read_text() == "abcd"


# -- diff rendering -------------------------------------------------------------------------


def test_diff_shows_four_context_lines_outside_changes_and_whole_runs_between_them():
    # pi's generateDiffString: context before the first and after the last change is cut
    # to 4 lines; an unchanged run between two changes is shown whole.
    old = "".join(f"{i}\n" for i in range(1, 21))
    new = old.replace("\n8\n", "\neight\n").replace("\n11\n", "\neleven\n")
    diff, first = generate_diff_string(old, new)
    assert first == 8
    assert diff.split("\n") == [
        "    ...",
        "  4 4", "  5 5", "  6 6", "  7 7",
        "- 8 8", "+ 8 eight",
        "  9 9", " 10 10",
        "-11 11", "+11 eleven",
        " 12 12", " 13 13", " 14 14", " 15 15",
        "    ...",
    ]  # fmt: skip


def test_fuzzy_normalization_maps_quotes_dashes_spaces_and_trailing_whitespace():
    assert normalize_for_fuzzy_match("\u2018a\u2019 \u201cb\u201d c\u2014d\u00a0e  \nf\t") == "'a' \"b\" c-d e\nf"


# -- edits[] (pi 0.73) ------------------------------------------------------------------------


async def test_edit_applies_several_replacements_matched_against_the_original_file(tmp_path):
    (tmp_path / "f.py").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    # The second edit's oldText exists only in the original file: it is not affected by the first.
    edits = [{"oldText": "line 3\n", "newText": "line 3\nline 4\n"}, {"oldText": "line 4\n", "newText": "LINE 4\n"},
             {"oldText": "line 20\n", "newText": "line twenty\n"}]  # fmt: skip
    result = await call("edit", tmp_path, path="f.py", edits=edits)
    assert text_of(result) == "Successfully replaced 3 block(s) in f.py."
    lines = (tmp_path / "f.py").read_text().split("\n")
    assert lines[2:6] == ["line 3", "line 4", "LINE 4", "line 5"] and "line twenty" in lines
    # pi 0.73's diff between two changes: 4 lines after one, "...", 4 before the next.
    diff = result["details"]["diff"].split("\n")
    assert diff[diff.index("+ 5 LINE 4") + 1 : diff.index("-20 line 20")] == [
        "  5 line 5", "  6 line 6", "  7 line 7", "  8 line 8", "    ...", " 16 line 16", " 17 line 17",
        " 18 line 18", " 19 line 19",
    ]  # fmt: skip
    assert result["details"]["firstChangedLine"] == 5


async def test_edit_with_one_bad_entry_changes_nothing_and_names_the_entry(tmp_path):
    (tmp_path / "f.txt").write_text("alpha\nbeta\ngamma\nbeta\n")
    before = snapshot(tmp_path)
    cases = [
        ([{"oldText": "alpha", "newText": "A"}, {"oldText": "delta", "newText": "D"}],
         "Could not find edits[1] in f.txt. The oldText must match exactly including all whitespace and newlines."),
        ([{"oldText": "alpha", "newText": "A"}, {"oldText": "beta", "newText": "B"}],
         "Found 2 occurrences of edits[1] in f.txt. Each oldText must be unique. Please provide more context to "
         "make it unique."),
        ([{"oldText": "alpha\nbeta", "newText": "AB"}, {"oldText": "ta\ngam", "newText": "x"}],
         "edits[0] and edits[1] overlap in f.txt. Merge them into one edit or target disjoint regions."),
        ([{"oldText": "alpha", "newText": "alpha"}, {"oldText": "gamma", "newText": "gamma"}],
         "No changes made to f.txt. The replacements produced identical content."),
        ([], "Edit tool input is invalid. edits must contain at least one replacement."),
    ]  # fmt: skip
    for edits, message in cases:
        with pytest.raises(ToolError) as info:
            await call("edit", tmp_path, path="f.txt", edits=edits)
        assert info.value.message == message
        assert snapshot(tmp_path) == before


async def test_edit_accepts_the_legacy_pair_and_edits_sent_as_a_json_string(tmp_path):
    from pi_actors.coding.tools.edit import prepare_edit_arguments

    (tmp_path / "f.txt").write_text("one two three")
    await call("edit", tmp_path, path="f.txt", edits='[{"oldText": "one", "newText": "1"}]', oldText="three", newText="3")
    assert (tmp_path / "f.txt").read_text() == "1 two 3"
    assert prepare_edit_arguments({"path": "p", "oldText": "a", "newText": "b"}) == {
        "path": "p", "edits": [{"oldText": "a", "newText": "b"}]}  # fmt: skip
    # What validation sees after preparation satisfies the schema the model is given.
    from pi_actors.agent.validation import validate_tool_arguments

    prepared = prepare_edit_arguments({"path": "p", "oldText": "a", "newText": "b"})
    assert validate_tool_arguments(TOOL_SPECS["edit"], prepared) == prepared


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["oldText", "newText", "edits", "path", "x"]), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(["path", "edits", "oldText", "newText"]), _JSON | st.text(max_size=30), max_size=4))
def test_hostile_edit_arguments_are_refused_with_a_tool_error_or_edit_the_file(tmp_path_factory, args):
    directory = tmp_path_factory.mktemp("edit")
    (directory / "f.txt").write_text("alpha beta\n")
    args = {**args, "path": "f.txt"} if "path" not in args else args

    async def attempt() -> None:
        try:
            result = await call("edit", directory, **args)
        except ToolError as exc:
            assert exc.message and (directory / "f.txt").read_text() == "alpha beta\n"
        else:
            assert text_of(result).startswith("Successfully replaced ")

    trio.run(attempt)
