"""Images as a user notices them (issue 17 requirement 4): ``read`` of a large image sends it
within pi's limits, a broken image is an error result, a text-only model gets pi's
placeholder, ``images.blockImages`` sends none, and each provider sends a prompt's image in
its API's own shape (real SDKs against the scripted server)."""

from __future__ import annotations

import base64
import io
import os

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from support.providers import APIS, model_for

from pi_actors import ai
from pi_actors.coding.images import (
    IMAGES_BLOCKED,
    ImageDecodeError,
    block_images,
    detect_image_mime,
    resize_image,
)
from pi_actors.coding.tools import ToolError, run_tool
from pi_actors.testing import Reply, ScriptedLLM


def encoded(image: Image.Image, fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def decoded(data: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(data)))


# -- read ------------------------------------------------------------------------------------


async def test_read_of_a_wide_image_sends_it_at_2000_pixels_with_pis_dimension_note(tmp_path):
    (tmp_path / "wide.png").write_bytes(encoded(Image.new("RGB", (2400, 300), "navy")))
    result = await run_tool("read", {"path": "wide.png"}, cwd=str(tmp_path))
    text, image = result["content"]
    assert text["text"] == (
        "Read image file [image/png]\n[Image: original 2400x300, displayed at 2000x250. "
        "Multiply coordinates by 1.20 to map to original image.]"
    )
    assert decoded(image["data"]).size == (2000, 250) and image["mimeType"] == "image/png"


async def test_read_with_auto_resize_off_sends_the_file_as_it_is(tmp_path):
    raw = encoded(Image.new("RGB", (2500, 10), "red"))
    (tmp_path / "big.png").write_bytes(raw)
    result = await run_tool("read", {"path": "big.png"}, cwd=str(tmp_path), auto_resize_images=False)
    assert result["content"][0]["text"] == "Read image file [image/png]"
    assert base64.b64decode(result["content"][1]["data"]) == raw


async def test_read_of_a_broken_image_is_an_error_result_not_a_crash(tmp_path):
    whole = encoded(Image.new("RGB", (64, 64), "green"))
    (tmp_path / "cut.png").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "fake.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 40)
    for name in ("cut.png", "fake.jpg"):
        with pytest.raises(ToolError) as info:
            await run_tool("read", {"path": name}, cwd=str(tmp_path))
        assert info.value.message.startswith(f"Cannot read image {name}: the image cannot be decoded (")
        assert "\n" not in info.value.message


def test_an_image_over_the_byte_limit_is_reencoded_smaller_or_dropped():
    noise = Image.frombytes("RGB", (120, 120), os.urandom(120 * 120 * 3))
    raw = encoded(noise)
    small = resize_image(raw, "image/png", max_bytes=12_000)
    assert small is not None and small.was_resized and len(small.data) < 12_000
    assert small.mime_type == "image/jpeg"  # noise: JPEG beats PNG
    assert resize_image(raw, "image/png", max_bytes=10) is None  # not even 1x1 fits: pi omits it


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.sampled_from([b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a", b"RIFF\0\0\0\0WEBP"]))
def test_hostile_bytes_behind_an_image_signature_decode_or_fail_cleanly(tail, magic):
    raw = magic + tail
    assert detect_image_mime(raw) is not None
    try:
        result = resize_image(raw, detect_image_mime(raw) or "image/png", max_width=8, max_height=8)
    except ImageDecodeError as exc:
        assert str(exc).startswith("the image cannot be decoded")
    else:
        assert result is None or result.width <= 8


# -- what the model is sent --------------------------------------------------------------------


IMG = ai.ImageContent(data="iVBORw0KGgo=", mime_type="image/png")


def test_a_text_only_model_gets_pis_placeholder_instead_of_the_images():
    text_only = ai.Model(id="t", api="openai-completions", provider="openai", input=["text"])
    history = [
        ai.UserMessage(content=[ai.TextContent(text="look"), IMG, IMG], timestamp=1),
        ai.ToolResultMessage(tool_call_id="c", tool_name="read", content=[ai.TextContent(text="Read image file"), IMG],
                             is_error=False, timestamp=2),
    ]  # fmt: skip
    user, tool = ai.transform_messages(history, text_only)
    assert user.content == [ai.TextContent(text="look"),
                            ai.TextContent(text="(image omitted: model does not support images)")]  # fmt: skip
    assert tool.content[1] == ai.TextContent(text="(tool image omitted: model does not support images)")
    vision = ai.Model(id="v", api="openai-completions", provider="openai", input=["text", "image"])
    assert ai.transform_messages(history, vision)[0].content[1] == IMG


def test_block_images_replaces_every_image_with_pis_text_once_per_run():
    history = [ai.UserMessage(content=[IMG, IMG, ai.TextContent(text="and"), IMG], timestamp=1)]
    (user,) = block_images(history)
    assert [b.text for b in user.content] == [IMAGES_BLOCKED, "and", IMAGES_BLOCKED]
    assert history[0].content[0] is IMG  # the input is not changed


@pytest.mark.parametrize("api", APIS)
async def test_each_provider_sends_a_prompts_image_in_its_apis_shape(api):
    server = ScriptedLLM([Reply(text="a red square")])
    context = ai.Context(messages=[ai.UserMessage(content=[ai.TextContent(text="what is this?"), IMG], timestamp=1)])

    async def ignore(_event: object) -> None:
        pass

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        final = await ai.stream(model_for(api, server), context, ai.StreamOptions(api_key="sk-test"), ignore)
        nursery.cancel_scope.cancel()
    assert final.stop_reason == "stop", final.error_message
    body = server.requests[-1]["body"]
    if api == "anthropic-messages":
        parts = body["messages"][0]["content"]
        parts[1].pop("cache_control", None)  # the prompt cache mark on the last block
        assert parts[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMG.data}}
    elif api == "openai-completions":
        parts = body["messages"][-1]["content"]
        assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMG.data}"}}
    else:
        parts = body["input"][-1]["content"]
        assert parts[1] == {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{IMG.data}"}
    assert parts[0]["text"] == "what is this?"

