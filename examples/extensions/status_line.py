"""A status-line widget: the turn count and the tool calls so far, under the TUI's footer
(``ctx.ui.set_status``), kept up to date as the agent works; Alt+S starts the count again.

    pi-actors -e examples/extensions/status_line.py

The status is set at ``session_start`` (before the TUI is up: it is shown once it is), after
each tool call and at each turn's end. Over RPC the same updates are ``extension_ui_request``
events with ``method: "setStatus"``.
"""


def register(pi):
    state = {"turns": 0, "tools": 0, "failed": 0}

    async def show(ctx):
        failed = f" ({state['failed']} failed)" if state["failed"] else ""
        await ctx.ui.set_status("stats", f"turns: {state['turns']} tool calls: {state['tools']}{failed}")

    async def on_session_start(event, ctx):
        await show(ctx)

    async def on_tool_result(event, ctx):
        state["tools"] += 1
        state["failed"] += 1 if event.get("isError") else 0
        await show(ctx)

    async def on_turn_end(event, ctx):
        state["turns"] += 1
        await show(ctx)

    async def reset(ctx):
        state.update(turns=0, tools=0, failed=0)
        await show(ctx)
        await ctx.ui.notify("status line: counts reset")

    pi.on("session_start", on_session_start)
    pi.on("tool_result", on_tool_result)
    pi.on("turn_end", on_turn_end)
    pi.register_shortcut("alt+s", reset, description="Reset the status line's counts")
