"""Images through the real CLI (issue 17 requirement 4): ``@shot.png`` on the command line and
RPC ``images`` reach the model as image parts, the session file keeps them in pi's shape, and
the same session continued on a text-only model sends pi's placeholder instead."""

from __future__ import annotations

import base64
import io
import json
import subprocess

import trio
from conftest import CLI
from PIL import Image

from pi_actors.testing.scripted_server import Reply


def _with_vision_model(env, scripted) -> None:
    """models.json gains ``scripted/scripted-vision``, a model that takes images."""
    doc = json.loads((env.home / "models.json").read_text())
    doc["providers"]["scripted"]["models"].append({"id": "scripted-vision", "input": ["text", "image"]})
    (env.home / "models.json").write_text(json.dumps(doc))


def _png(size=(4, 3), color="red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def _user_parts(request: dict) -> list[dict]:
    return [m for m in request["body"]["messages"] if m["role"] == "user"][-1]["content"]


async def test_an_image_attached_on_the_command_line_is_sent_saved_and_replaced_for_a_text_only_model(scripted, env):
    _with_vision_model(env, scripted)
    # images.autoResize off: the wide image is sent as the file has it.
    (env.home / "settings.json").write_text(json.dumps({"images": {"autoResize": False}}))
    png = _png((2100, 3))
    (env.work / "shot.png").write_bytes(png)
    scripted.script += [Reply(text="A red rectangle."), Reply(text="Still red.")]
    sessions = str(env.sessions)
    first = await env.run("--model", "scripted/scripted-vision", "--session-dir", sessions, "-p", "@shot.png", "what is it?")
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout.decode().strip() == "A red rectangle."
    text, image = _user_parts(scripted.requests[0])
    assert text == {"type": "text", "text": f'<file name="{env.work / "shot.png"}"></file>\nwhat is it?'}
    assert image == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}

    # The session file holds the image in pi's shape.
    (path,) = list(env.sessions.rglob("*.jsonl"))
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    (user,) = [e["message"] for e in entries if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert user["content"][1] == {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"}

    # Continued on a model without image input: the history is sent with pi's placeholder.
    second = await env.run("--model", "scripted/scripted-model", "--session-dir", sessions, "-c", "-p", "and now?")
    assert second.returncode == 0, second.stderr.decode()
    history = [m for m in scripted.requests[1]["body"]["messages"] if m["role"] == "user"]
    assert history[0]["content"][1] == {"type": "text", "text": "(image omitted: model does not support images)"}


def test_a_wide_image_on_the_command_line_is_resized_and_noted_as_pi_does(tmp_path):
    from pi_actors.cli._initial import initial_messages, prompt_images

    (tmp_path / "wide.png").write_bytes(_png((4000, 20)))
    (first,) = initial_messages(["@wide.png", "what?"], None, str(tmp_path))
    assert first == (f'<file name="{tmp_path / "wide.png"}">[Image: original 4000x20, displayed at 2000x10. '
                     'Multiply coordinates by 2.00 to map to original image.]</file>\nwhat?')  # fmt: skip
    (image,) = prompt_images(first)["images"]
    assert Image.open(io.BytesIO(base64.b64decode(image["data"]))).size == (2000, 10)


def test_a_broken_image_on_the_command_line_is_one_line_naming_the_file(tmp_path):
    from pi_actors.cli._initial import AttachError, initial_messages

    (tmp_path / "broken.png").write_bytes(_png()[:20])
    try:
        initial_messages(["@broken.png", "what?"], None, str(tmp_path))
    except AttachError as exc:
        message = str(exc)
    assert message.startswith(f"Cannot attach {tmp_path / 'broken.png'}: the image cannot be decoded (")
    assert "\n" not in message


async def test_rpc_prompt_images_reach_the_model_and_bad_images_are_refused(scripted, env):
    _with_vision_model(env, scripted)
    scripted.script += [Reply(text="Seen.")]
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-vision", "--mode", "rpc", "--no-session"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    buffer = b""

    async def until(predicate) -> dict:
        nonlocal buffer
        with trio.fail_after(30):
            while True:
                while b"\n" not in buffer:
                    data = await proc.stdout.receive_some()
                    assert data, "the RPC process closed its output"
                    buffer += data
                line, buffer = buffer.split(b"\n", 1)
                obj = json.loads(line)
                if predicate(obj):
                    return obj

    async def send(obj: dict) -> None:
        await proc.stdin.send_all(json.dumps(obj).encode() + b"\n")

    data = base64.b64encode(_png()).decode()
    await send({"id": "bad", "type": "prompt", "message": "look", "images": [{"type": "image", "data": 7}]})
    bad = await until(lambda o: o.get("id") == "bad")
    assert bad["success"] is False and "images[0] must be" in bad["error"]
    await send({"id": "p", "type": "prompt", "message": "look", "images": [{"type": "image", "data": data, "mimeType": "image/png"}]})
    assert (await until(lambda o: o.get("id") == "p"))["success"] is True
    end = await until(lambda o: o.get("type") == "agent_end")
    user = [m for m in end["messages"] if m["role"] == "user"][0]
    assert user["content"] == [{"type": "text", "text": "look"}, {"type": "image", "data": data, "mimeType": "image/png"}]
    assert _user_parts(scripted.requests[0])[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    await proc.stdin.aclose()
    with trio.fail_after(30):
        while await proc.stdout.receive_some():
            pass
        assert await proc.wait() == 0


async def test_a_session_reads_images_in_its_sandboxed_workers_and_block_images_keeps_them_from_the_model(scripted, tmp_path):
    """The whole chain in one runtime: the tool worker (sandboxed) resizes a wide image with
    Pillow, the legacy ``oldText``/``newText`` edit form still works through the agent's
    argument preparation, and ``images.blockImages`` sends pi's text instead of any image."""
    from conftest import actor_config

    from pi_actors.actors import open_local_runtime
    from pi_actors.protocol.events import AgentEventRebuilder
    from pi_actors.testing.wire_formats import ScriptToolCall

    (tmp_path / "wide.png").write_bytes(_png((2400, 30), "blue"))
    (tmp_path / "a.txt").write_text("hello world\n")
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="read", arguments={"path": "wide.png"}),
                          ScriptToolCall(name="edit", arguments={"path": "a.txt", "oldText": "world", "newText": "there"})]),
        Reply(text="done"),
    ]  # fmt: skip
    settings = {"retry": {"enabled": False}, "images": {"blockImages": True}}
    ends: dict[str, dict] = {}
    async with open_local_runtime(actor_config(scripted, tmp_path, tools=("read", "edit"), settings=settings)) as coordinator:
        rebuild = AgentEventRebuilder()
        async with coordinator.open_call("prompt", {"text": "look"}) as call:
            async for data in call:
                event = rebuild.apply(data)
                if event["type"] == "tool_execution_end":
                    ends[event["toolName"]] = event["result"]
            await call.result()
    text, image = ends["read"]["content"]
    assert text["text"].startswith("Read image file [image/png]\n[Image: original 2400x30, displayed at 2000x25.")
    assert Image.open(io.BytesIO(base64.b64decode(image["data"]))).size == (2000, 25)
    assert ends["edit"]["content"][0]["text"] == "Successfully replaced 1 block(s) in a.txt."
    assert (tmp_path / "a.txt").read_text() == "hello there\n"
    sent = json.dumps(scripted.requests[1]["body"])
    assert "Image reading is disabled." in sent and "data:image" not in sent


def test_at_words_of_a_typed_prompt_that_name_images_attach_them_and_nothing_else(tmp_path):
    from pi_actors.cli._initial import images_in_prompt

    raw = _png((2, 2), "white")
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "a.png").write_bytes(raw)
    (tmp_path / "notes.txt").write_text("text")
    prompt = "compare @shots/a.png, @notes.txt and @missing.png; mail me@example.com"
    (image,) = images_in_prompt(prompt, str(tmp_path))
    assert image == {"type": "image", "data": base64.b64encode(raw).decode(), "mimeType": "image/png"}
    assert images_in_prompt("no images here", str(tmp_path)) == []
