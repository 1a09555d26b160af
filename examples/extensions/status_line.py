"""A status-line widget: shows the turn count and the tools used so far.

    pi-actors -e examples/extensions/status_line.py
"""


def register(pi):
    state = {"turns": 0, "tools": 0}

    async def show(ctx):
        await ctx.ui.set_status("stats", f"turns: {state['turns']}  tool calls: {state['tools']}")

    async def on_turn_end(event, ctx):
        state["turns"] += 1
        state["tools"] += len(event.get("toolResults") or [])
        await show(ctx)

    async def on_session_start(event, ctx):
        await show(ctx)

    pi.on("session_start", on_session_start)
    pi.on("turn_end", on_turn_end)
