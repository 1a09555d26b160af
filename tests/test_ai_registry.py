"""The entry points and the provider registry: errors as events, lazy SDK imports."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from pi_actors import ai
from pi_actors.ai import registry
from pi_actors.ai.registry import BUILTIN_PROVIDER_MODULES

ROOT = Path(__file__).resolve().parents[1]


def tag(event: object) -> str:
    return type(event).__struct_config__.tag  # type: ignore[attr-defined]


class Sink:
    def __init__(self) -> None:
        self.events: list = []

    async def __call__(self, event) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return [tag(e) for e in self.events]


@pytest.fixture(autouse=True)
def fresh_registry():
    yield
    ai.reset_api_providers()


def model(api: str = "custom-api") -> ai.Model:
    return ai.Model(id="m1", api=api, provider="prov")


CONTEXT = ai.Context(messages=[ai.UserMessage(content="hi", timestamp=1)])


@pytest.mark.parametrize("entry", [ai.stream, ai.stream_simple])
async def test_unknown_api_is_one_error_event(entry):
    sink = Sink()
    result = await entry(model("no-such-api"), CONTEXT, None, sink)
    assert sink.types == ["error"]
    assert result.stop_reason == "error"
    assert result.error_message == "No API provider registered for api: no-such-api"
    assert (result.api, result.provider, result.model, result.content) == ("no-such-api", "prov", "m1", [])


def test_builtin_apis_are_registered():
    assert {p.api for p in ai.get_api_providers()} >= {"anthropic-messages", "openai-completions",
                                                        "openai-responses"}


async def test_a_custom_provider_is_called_and_mismatched_apis_are_refused():
    calls = []

    async def fake(m, context, options, emit):
        calls.append(m.id)
        msg = ai.new_assistant_message(m)
        await emit(ai.StartEvent(partial=msg))
        await emit(ai.DoneEvent(reason="stop", message=msg))
        return msg

    ai.register_api_provider(ai.ApiProvider(api="custom-api", stream=fake, stream_simple=fake), source_id="ext")
    sink = Sink()
    result = await ai.stream(model(), CONTEXT, None, sink)
    assert sink.types == ["start", "done"] and result.stop_reason == "stop" and calls == ["m1"]

    provider = ai.get_api_provider("custom-api")
    sink = Sink()
    result = await provider.stream(model("other-api"), CONTEXT, None, sink)
    assert sink.types == ["error"] and result.error_message == "Mismatched api: other-api expected custom-api"

    ai.unregister_api_providers("ext")
    assert ai.get_api_provider("custom-api") is None


async def test_a_raising_provider_still_ends_with_one_error_event_keeping_partial_content():
    async def broken(m, context, options, emit):
        msg = ai.new_assistant_message(m)
        await emit(ai.StartEvent(partial=msg))
        msg.content.append(ai.TextContent(text="half"))
        await emit(ai.TextStartEvent(content_index=0, partial=msg))
        raise RuntimeError("provider bug")

    ai.register_api_provider(ai.ApiProvider(api="custom-api", stream=broken, stream_simple=broken))
    sink = Sink()
    result = await ai.stream(model(), CONTEXT, None, sink)
    assert sink.types == ["start", "text_start", "error"]
    assert result.error_message == "provider bug" and result.content == [ai.TextContent(text="half")]


async def test_a_provider_without_terminal_event_gets_one_and_late_events_are_dropped():
    async def silent(m, context, options, emit):
        return ai.new_assistant_message(m)

    async def chatty(m, context, options, emit):
        msg = ai.new_assistant_message(m)
        await emit(ai.DoneEvent(reason="stop", message=msg))
        await emit(ai.ErrorEvent(reason="error", error=msg))
        await emit(ai.StartEvent(partial=msg))
        return msg

    ai.register_api_provider(ai.ApiProvider(api="custom-api", stream=silent, stream_simple=chatty))
    sink = Sink()
    result = await ai.stream(model(), CONTEXT, None, sink)
    assert sink.types == ["error"] and "without a terminal event" in result.error_message
    sink = Sink()
    result = await ai.stream_simple(model(), CONTEXT, None, sink)
    assert sink.types == ["done"] and result.stop_reason == "stop"


async def test_a_provider_module_that_fails_to_import_gives_an_error_event(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_PROVIDER_MODULES, "broken-api", "pi_actors.ai.providers.does_not_exist")
    ai.reset_api_providers()
    sink = Sink()
    result = await ai.stream(model("broken-api"), CONTEXT, None, sink)
    assert sink.types == ["error"]
    assert "does_not_exist" in result.error_message


def test_importing_the_package_does_not_import_the_sdks():
    code = textwrap.dedent("""
        import sys
        import pi_actors.ai
        import pi_actors.ai.stream, pi_actors.ai.registry, pi_actors.ai.catalog, pi_actors.ai.overflow
        heavy = [m for m in ("anthropic", "openai", "google", "httpx2") if m in sys.modules]
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_first_use_imports_the_provider_sdk_once_even_when_concurrent():
    code = textwrap.dedent("""
        import socket, sys, trio
        from pi_actors import ai
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again: connections are refused
        async def one(api, results):
            async def emit(e): pass
            url = f"http://127.0.0.1:{port}" + ("/v1" if api.startswith("openai") else "")
            m = ai.Model(id="m", api=api, provider="p", base_url=url)
            results.append((await ai.stream(m, ai.Context(), ai.StreamOptions(api_key="k"), emit)).error_message)
        async def main():
            results = []
            async with trio.open_nursery() as n:
                for api in ["openai-completions"] * 2 + ["openai-responses"] + ["anthropic-messages"] * 2:
                    n.start_soon(one, api, results)
            return results
        results = trio.run(main)
        print(all(r.startswith("Connection error") for r in results), len(results), results)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["True", "5"], out.stdout


@pytest.mark.parametrize("api", sorted(BUILTIN_PROVIDER_MODULES))
async def test_every_provider_warms_up_before_its_first_call_without_an_error(api):
    """The provider actor warms the session's provider up while it waits for the first
    request; a warm-up that raises would end that actor (mistral's closed its client wrongly)."""
    module = importlib.import_module(BUILTIN_PROVIDER_MODULES[api])
    module.prepare()
    with trio.fail_after(60):
        await module.warm_up()
