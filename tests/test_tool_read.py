"""The read tool and the head-truncation helpers, as the model sees them (pi spec §1.2–§1.4)."""

from __future__ import annotations

import base64
import os

import pytest
import trio

from pi_actors.coding.tools import (
    DEFAULT_TOOLS,
    TOOL_SPECS,
    ToolError,
    format_size,
    run_tool,
    truncate_head,
    truncate_line,
)

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def read(cwd, **args):
    return await run_tool("read", args, cwd=str(cwd))


def text_of(result):
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
    return result["content"][0]["text"]


def write_lines(path, count, fmt="Line {}"):
    path.write_text("\n".join(fmt.format(i) for i in range(1, count + 1)))


async def test_small_file_is_returned_whole_without_notice_or_details(tmp_path):
    (tmp_path / "a.txt").write_text("hello\nworld\n")
    result = await read(tmp_path, path="a.txt")
    assert text_of(result) == "hello\nworld\n"
    assert result["details"] is None


async def test_missing_file_reports_enoent_with_the_absolute_path(tmp_path):
    with pytest.raises(ToolError) as info:
        await read(tmp_path, path="nope.txt")
    assert info.value.message == f"ENOENT: no such file or directory, access '{tmp_path / 'nope.txt'}'"


async def test_directory_is_reported_as_eisdir(tmp_path):
    with pytest.raises(ToolError, match="^EISDIR: illegal operation on a directory, read$"):
        await read(tmp_path, path=".")


async def test_long_file_stops_at_2000_lines_and_says_how_to_continue(tmp_path):
    write_lines(tmp_path / "big.txt", 2500)
    result = await read(tmp_path, path="big.txt")
    text = text_of(result)
    assert "Line 1\n" in text and "Line 2000" in text and "Line 2001" not in text
    assert text.endswith("Line 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]")
    truncation = result["details"]["truncation"]
    assert truncation["truncated"] is True
    assert truncation["truncatedBy"] == "lines"
    assert truncation["totalLines"] == 2500
    assert truncation["outputLines"] == 2000
    assert set(truncation) == {
        "content", "truncated", "truncatedBy", "totalLines", "totalBytes", "outputLines",
        "outputBytes", "lastLinePartial", "firstLineExceedsLimit", "maxLines", "maxBytes",
    }


async def test_file_over_50kb_stops_at_the_byte_limit_and_says_so(tmp_path):
    line = "x" * 200
    (tmp_path / "wide.txt").write_text("\n".join(f"{i:04d}{line}" for i in range(1, 501)))
    result = await read(tmp_path, path="wide.txt")
    text = text_of(result)
    # 204 bytes per line, 205 with its newline: 204 + 248 * 205 = 51044 <= 51200 < 51249.
    assert text.endswith("\n\n[Showing lines 1-249 of 500 (50.0KB limit). Use offset=250 to continue.]")
    assert result["details"]["truncation"]["truncatedBy"] == "bytes"
    assert len(text.split("\n\n[")[0].encode()) <= 51200


async def test_offset_starts_at_that_line_and_reads_to_the_end(tmp_path):
    write_lines(tmp_path / "f.txt", 100)
    text = text_of(await read(tmp_path, path="f.txt", offset=51))
    assert text.startswith("Line 51\n") and text.endswith("Line 100")
    assert "Line 50\n" not in text and "Use offset=" not in text


async def test_limit_reports_how_many_lines_remain(tmp_path):
    write_lines(tmp_path / "f.txt", 100)
    text = text_of(await read(tmp_path, path="f.txt", limit=10))
    lines = "\n".join(f"Line {i}" for i in range(1, 11))
    assert text == lines + "\n\n[90 more lines in file. Use offset=11 to continue.]"


async def test_offset_with_limit_reads_a_window(tmp_path):
    write_lines(tmp_path / "f.txt", 100)
    result = await read(tmp_path, path="f.txt", offset=41, limit=20)
    lines = "\n".join(f"Line {i}" for i in range(41, 61))
    assert text_of(result) == lines + "\n\n[40 more lines in file. Use offset=61 to continue.]"
    assert result["details"] is None


async def test_offset_beyond_the_end_of_the_file_is_an_error(tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\nc")
    with pytest.raises(ToolError) as info:
        await read(tmp_path, path="f.txt", offset=100)
    assert info.value.message == "Offset 100 is beyond end of file (3 lines total)"


async def test_first_line_over_50kb_points_to_sed(tmp_path):
    (tmp_path / "min.js").write_text("short\n" + "y" * 60000 + "\nafter")
    result = await read(tmp_path, path="min.js", offset=2)
    assert text_of(result) == (
        "[Line 2 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '2p' min.js | head -c 51200]"
    )
    assert result["details"]["truncation"]["firstLineExceedsLimit"] is True


async def test_png_bytes_are_an_image_attachment_whatever_the_extension(tmp_path):
    (tmp_path / "image.txt").write_bytes(PNG_1X1)
    result = await read(tmp_path, path="image.txt")
    text_block, image_block = result["content"]
    assert text_block == {"type": "text", "text": "Read image file [image/png]"}
    assert image_block["type"] == "image" and image_block["mimeType"] == "image/png"
    # Returned unchanged: no resizing or re-encoding.
    assert base64.b64decode(image_block["data"]) == PNG_1X1


@pytest.mark.parametrize("fmt, mime", [("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")])
async def test_jpeg_gif_and_webp_are_recognised_by_magic_bytes(tmp_path, fmt, mime):
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (3, 2), "red").save(out, fmt)
    (tmp_path / "blob").write_bytes(out.getvalue())
    result = await read(tmp_path, path="blob")
    assert result["content"][0]["text"] == f"Read image file [{mime}]"
    assert result["content"][1]["mimeType"] == mime
    assert base64.b64decode(result["content"][1]["data"]) == out.getvalue()  # within the limits: as it is


async def test_text_named_png_is_read_as_text(tmp_path):
    (tmp_path / "not-an-image.png").write_text("just text")
    result = await read(tmp_path, path="not-an-image.png")
    assert text_of(result) == "just text"


async def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 ok\n\xff\xfe end")
    text = text_of(await read(tmp_path, path="latin1.txt"))
    assert text.startswith("caf\ufffd ok\n")
    assert text.endswith(" end") and "\ufffd" in text.split("\n")[1]


async def test_paths_resolve_against_cwd_and_accept_at_prefix_and_absolute(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_text("content")
    assert text_of(await read(tmp_path, path="@sub/f.txt")) == "content"
    assert text_of(await read("/", path=str(tmp_path / "sub" / "f.txt"))) == "content"
    assert text_of(await read(tmp_path / "sub", path="../sub/./f.txt")) == "content"


async def test_tilde_expands_to_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes.md").write_text("home file")
    assert text_of(await read("/", path="~/notes.md")) == "home file"


async def test_macos_screenshot_name_is_found_with_narrow_no_break_space(tmp_path):
    real = "Screenshot 2024-01-01 at 10.00.00\u202fAM.png"
    (tmp_path / real).write_text("shot")
    assert text_of(await read(tmp_path, path="Screenshot 2024-01-01 at 10.00.00 AM.png")) == "shot"


async def test_curly_apostrophe_variant_is_found(tmp_path):
    (tmp_path / "Bob\u2019s file.txt").write_text("bob")
    assert text_of(await read(tmp_path, path="Bob's file.txt")) == "bob"


async def test_unknown_tool_name_is_reported():
    with pytest.raises(ToolError) as info:
        await run_tool("teleport", {}, cwd="/")
    assert info.value.message == "Tool teleport not found"


def test_specs_describe_read_and_bash_and_default_set_matches_pi():
    assert TOOL_SPECS["read"].parameters["required"] == ["path"]
    assert "2000 lines or 50KB" in TOOL_SPECS["read"].description
    assert TOOL_SPECS["bash"].parameters["required"] == ["command"]
    assert DEFAULT_TOOLS == ("read", "bash", "edit", "write")


def test_format_size_uses_binary_units_with_one_decimal():
    assert format_size(0) == "0B"
    assert format_size(1023) == "1023B"
    assert format_size(1024) == "1.0KB"
    assert format_size(51200) == "50.0KB"
    assert format_size(1024 * 1024) == "1.0MB"
    assert format_size(int(1.5 * 1024 * 1024)) == "1.5MB"


def test_truncate_head_counts_a_trailing_newline_as_a_line():
    result = truncate_head("a\nb\nc\n", max_lines=3)
    assert result.truncated and result.truncated_by == "lines"
    assert result.content == "a\nb\nc"
    assert (result.total_lines, result.output_lines) == (4, 3)


def test_truncate_head_never_returns_a_partial_line():
    result = truncate_head("aaaa\nbbbb\ncccc", max_bytes=12)
    assert result.content == "aaaa\nbbbb"
    assert result.truncated_by == "bytes" and result.output_bytes == 9


def test_truncate_head_untouched_content_reports_full_counts():
    result = truncate_head("é\nx")
    assert not result.truncated and result.truncated_by is None
    assert (result.total_bytes, result.output_bytes, result.total_lines) == (4, 4, 2)


def test_truncate_line_cuts_at_500_characters():
    assert truncate_line("short") == ("short", False)
    text, cut = truncate_line("z" * 501)
    assert cut and text == "z" * 500 + "... [truncated]"



async def test_a_negative_offset_or_limit_is_a_clear_error(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    with pytest.raises(ToolError, match=r"^Offset must be a line number of 1 or more \(0 reads from the top\), got -2$"):
        await read(tmp_path, path="a.txt", offset=-2)
    with pytest.raises(ToolError, match=r"^Limit must be a number of lines of 0 or more, got -1$"):
        await read(tmp_path, path="a.txt", limit=-1)
    assert (tmp_path / "a.txt").read_text() == "one\ntwo\n"


async def test_a_non_utf8_file_is_read_with_replacement_characters_as_pi_does(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("caf\u00e9\n".encode("latin-1"))
    result = await read(tmp_path, path="latin1.txt")
    assert text_of(result) == "caf\ufffd\n"


# -- streaming, and what is not a regular file ----------------------------------------------
#
# Each read runs in a child process with its address space limited (RLIMIT_AS), so a read
# that loaded the file whole fails there with MemoryError instead of eating the host's memory,
# and one that hangs is ended by the bound.

_LIMITED_READ = r"""
import json, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import trio
from pi_actors.coding.tools import ToolError, run_tool

async def main():
    try:
        result = await run_tool("read", json.loads(sys.argv[3]), cwd=sys.argv[2])
    except ToolError as exc:
        return {"error": exc.message}
    return {"result": result}

print(json.dumps(trio.run(main)))
"""

_AS_LIMIT = 400 * 1024 * 1024


async def read_limited(cwd, **args) -> dict:
    """The read tool's outcome (``{"result"}`` or ``{"error"}``), run in a child whose address
    space is limited to 400 MiB."""
    import json
    import subprocess
    import sys

    with trio.fail_after(60):
        proc = await trio.run_process(
            [sys.executable, "-c", _LIMITED_READ, str(_AS_LIMIT), str(cwd), json.dumps(args)],
            capture_stdout=True, capture_stderr=True, check=False, stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


async def test_a_1_gb_file_is_read_in_bounded_memory(tmp_path):
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of NULs on one line, no disk used
    outcome = await read_limited(tmp_path, path="big.bin")
    assert outcome["result"]["content"][0]["text"] == (
        "[Line 1 is 1024.0MB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.bin | head -c 51200]"
    )
    assert outcome["result"]["details"]["truncation"]["totalBytes"] == 1 << 30


async def test_a_window_deep_in_a_large_file_counts_every_line(tmp_path):
    line = b"0123456789abcdef" * 63 + b"0123456789abcde\n"  # 1 KiB lines
    (tmp_path / "lines.txt").write_bytes(line * 16384)  # 16 MiB, 16,384 lines + the empty last
    outcome = await read_limited(tmp_path, path="lines.txt", offset=10000, limit=100)
    text = outcome["result"]["content"][0]["text"]
    kept = line.decode().rstrip("\n")
    # 50 lines of 1 KiB (1023 characters and the newline) fit in 50KB.
    assert text == "\n".join([kept] * 50) + (
        "\n\n[Showing lines 10000-10049 of 16385 (50.0KB limit). Use offset=10050 to continue.]"
    )


async def test_dev_zero_is_refused_as_a_character_device(tmp_path):
    outcome = await read_limited(tmp_path, path="/dev/zero")
    assert outcome == {"error": "/dev/zero is a character device, not a regular file; read only reads regular files"}


async def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    outcome = await read_limited(tmp_path, path="pipe")
    assert outcome == {"error": "pipe is a FIFO (named pipe), not a regular file; read only reads regular files"}


async def test_a_unix_socket_is_refused(tmp_path):
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        outcome = await read_limited(tmp_path, path="sock")
    assert outcome == {"error": "sock is a socket, not a regular file; read only reads regular files"}


async def test_a_directory_is_refused_with_pis_eisdir_text(tmp_path):
    (tmp_path / "sub").mkdir()
    outcome = await read_limited(tmp_path, path="sub")
    assert outcome == {"error": "EISDIR: illegal operation on a directory, read"}


async def test_an_image_over_10_mb_is_refused_with_its_size(tmp_path):
    with open(tmp_path / "huge.png", "wb") as f:
        f.write(PNG_1X1)
        f.truncate(12 * 1024 * 1024)
    with pytest.raises(ToolError) as info:
        await read(tmp_path, path="huge.png")
    assert info.value.message == "huge.png is an image of 12.0MB, over the 10.0MB limit for images"


@pytest.mark.parametrize("window", [(None, None), (3, None), (None, 4), (2, 3), (1, 0), (7, 1)])
async def test_the_streamed_window_matches_reading_the_whole_file(tmp_path, window):
    """Invalid UTF-8, CRLF, empty lines and a long line, read as a stream, give what
    decoding the whole file and cutting it with truncate_head gives."""
    data = b"caf\xc3\xa9\r\n\xff\xfe bad\n\n" + b"x" * 30000 + b"\nshort\n" + b"y" * 30000 + b"\nend"
    (tmp_path / "mixed.txt").write_bytes(data)
    offset, limit = window
    args = {k: v for k, v in (("offset", offset), ("limit", limit)) if v is not None}
    result = await read(tmp_path, path="mixed.txt", **args)
    lines = data.decode("utf-8", "replace").split("\n")
    start = (offset or 1) - 1
    selected = "\n".join(lines[start : start + limit] if limit is not None else lines[start:])
    truncation = truncate_head(selected)
    assert text_of(result).startswith(truncation.content)
    if truncation.truncated:
        assert result["details"]["truncation"] == truncation.to_json()


def _reference(data: bytes, path: str, offset, limit):
    """pi's read of a whole file in memory (spec §1.4), for comparison with the stream."""
    lines = data.decode("utf-8", "replace").split("\n")
    start = max(0, offset - 1) if offset else 0
    if start >= len(lines):
        return ("error", f"Offset {offset} is beyond end of file ({len(lines)} lines total)")
    chosen = lines[start : start + limit] if limit is not None else lines[start:]
    truncation = truncate_head("\n".join(chosen))
    return ("ok", truncation.to_json() if truncation.truncated else truncation.content)


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(
        st.one_of(st.binary(max_size=40), st.sampled_from([b"\n", b"\xe2\x82", b"\xac", b"\xff", b"\r\n"])),
        max_size=60,
    ).map(b"".join),
    cuts=st.lists(st.integers(min_value=1, max_value=7), max_size=30),
    offset=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
    limit=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
    small=st.booleans(),
)
def test_hostile_bytes_cut_anywhere_read_as_the_whole_file_would(data, cuts, offset, limit, small):
    with pytest.MonkeyPatch.context() as patch:
        if small:  # tiny limits, so truncation happens on tiny inputs
            from pi_actors.coding.tools import read as read_module

            patch.setattr(read_module, "DEFAULT_MAX_BYTES", 16)
            patch.setattr(read_module, "DEFAULT_MAX_LINES", 3)
        _check_stream_against_reference(data, cuts, offset, limit, small)


def _check_stream_against_reference(data, cuts, offset, limit, small):
    from pi_actors.coding.tools import read as read_module

    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(data[pos : pos + cut])
        pos += cut
    pieces.append(data[pos:])
    expected = _reference_small(data, offset, limit) if small else _reference(data, "f", offset, limit)
    try:
        result = read_module._text_result(iter([p for p in pieces if p]), "f", offset, limit)
    except ToolError as exc:
        assert expected == ("error", exc.message)
        return
    assert expected[0] == "ok"
    if isinstance(expected[1], dict):
        assert result["details"]["truncation"] == expected[1]
    else:
        assert result["content"][0]["text"].startswith(expected[1])
        assert result["details"] is None


def _reference_small(data: bytes, offset, limit):
    lines = data.decode("utf-8", "replace").split("\n")
    start = max(0, offset - 1) if offset else 0
    if start >= len(lines):
        return ("error", f"Offset {offset} is beyond end of file ({len(lines)} lines total)")
    chosen = lines[start : start + limit] if limit is not None else lines[start:]
    truncation = truncate_head("\n".join(chosen), max_lines=3, max_bytes=16)
    return ("ok", truncation.to_json() if truncation.truncated else truncation.content)


@pytest.mark.parametrize(
    "name, args",
    [
        ("read", {"path": "notes\x00.txt"}),
        ("write", {"path": "out\x00", "content": "x"}),
        ("edit", {"path": "\x00", "edits": [{"oldText": "a", "newText": "b"}]}),
        ("ls", {"path": "\x00"}),
        ("find", {"pattern": "*", "path": "dir\x00"}),
        ("grep", {"pattern": "x", "path": "\x00"}),
    ],
)
async def test_a_path_with_a_nul_character_is_a_tool_error_naming_it(tmp_path, name, args):
    with pytest.raises(ToolError) as info:
        await run_tool(name, args, cwd=str(tmp_path))
    assert "without null bytes" in str(info.value) and "\\x00" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing was written
