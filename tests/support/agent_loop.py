"""The agent loop driven by a scripted stream: recorder, tools, a runner, and pi-core §5's event invariants."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel

from pi_actors.agent import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    run_agent_loop,
)
from pi_actors.agent.testing import ScriptedStream, fake_model
from pi_actors.ai.abort import AbortSignal
from pi_actors.ai.types import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    now_ms,
)

MODEL = fake_model()


# -- helpers ------------------------------------------------------------------------------------


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=now_ms())


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    async def __call__(self, event: Any) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def trace(self, updates: bool = False) -> list[str]:
        out = []
        for e in self.events:
            if e.type == "message_update" and not updates:
                continue
            if e.type in ("message_start", "message_end"):
                out.append(f"{e.type}:{role_of(e.message)}")
            elif e.type.startswith("tool_execution"):
                out.append(f"{e.type}:{e.tool_call_id}")
            else:
                out.append(e.type)
        return out


def role_of(message: Any) -> str:
    if isinstance(message, AssistantMessage):
        return "assistant"
    if isinstance(message, ToolResultMessage):
        return "toolResult"
    if isinstance(message, UserMessage):
        return "user"
    return getattr(message, "role", "?")


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def make_tool(name: str = "echo", execute: Any = None, parameters: Any = None, **extra: Any) -> AgentTool:
    async def default(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=f"echo: {params.get('value')}")], details={"value": params.get("value")})

    if parameters is None:
        parameters = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
    return AgentTool(name=name, label=name, description=f"the {name} tool", parameters=parameters, execute=execute or default, **extra)


async def run(
    prompts: list[Any],
    stream: ScriptedStream,
    tools: list[Any] | None = None,
    messages: list[Any] | None = None,
    signal: AbortSignal | None = None,
    **config: Any,
) -> tuple[list[Any], Recorder]:
    rec = Recorder()
    context = AgentContext(system_prompt="sys", messages=list(messages or []), tools=list(tools or []))
    with trio.fail_after(5):
        result = await run_agent_loop(prompts, context, AgentLoopConfig(model=MODEL, **config), rec, signal, stream)
    check_invariants(rec.events, result)
    return result, rec


def check_invariants(events: list[Any], result: list[Any]) -> None:
    """pi-core §5 invariants 33-35, 39, 42, 43 on any finished run."""
    kinds = [e.type for e in events]
    assert kinds[0] == "agent_start" and kinds.count("agent_start") == 1
    assert kinds[-1] == "agent_end" and kinds.count("agent_end") == 1
    assert events[-1].messages == result
    # Turns alternate and each holds exactly one assistant message.
    in_turn = False
    assistants = 0
    for e in events:
        if e.type == "turn_start":
            assert not in_turn
            in_turn, assistants = True, 0
        elif e.type == "turn_end":
            assert in_turn and assistants == 1
            in_turn = False
        elif e.type == "message_end" and isinstance(e.message, AssistantMessage):
            assert in_turn
            assistants += 1
    assert not in_turn
    # message_start/end pair up, updates only inside an assistant message.
    open_message = None
    for e in events:
        if e.type == "message_start":
            assert open_message is None
            open_message = e.message
        elif e.type == "message_update":
            assert isinstance(open_message, AssistantMessage)
        elif e.type == "message_end":
            assert open_message is not None and role_of(open_message) == role_of(e.message)
            open_message = None
    assert open_message is None
    # Every tool call of a completed assistant message: one start, one end, one result, in order.
    for m in result:
        if not isinstance(m, AssistantMessage) or m.stop_reason in ("error", "aborted"):
            continue
        for block in m.content:
            if not isinstance(block, ToolCall):
                continue
            mine = [
                (i, e.type)
                for i, e in enumerate(events)
                if (e.type.startswith("tool_execution") and e.tool_call_id == block.id)
                or (e.type in ("message_start", "message_end") and isinstance(e.message, ToolResultMessage) and e.message.tool_call_id == block.id)
            ]
            kinds_for_call = [k for _, k in mine]
            assert kinds_for_call.count("tool_execution_start") == 1
            assert kinds_for_call.count("tool_execution_end") == 1
            assert kinds_for_call[0] == "tool_execution_start"
            assert kinds_for_call[-3:] == ["tool_execution_end", "message_start", "message_end"]
            assert [r for r in result if isinstance(r, ToolResultMessage) and r.tool_call_id == block.id].__len__() == 1
