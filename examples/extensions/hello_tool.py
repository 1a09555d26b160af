"""A tool the model can call, and a /hello command.

    pi-actors -e examples/extensions/hello_tool.py -p "greet Bob with the hello tool"
"""


def register(pi):
    async def execute(tool_call_id, params, signal, on_update, ctx):
        name = params["name"]
        await on_update({"content": f"looking up {name}..."})
        return {"content": [{"type": "text", "text": f"hello {name}"}], "details": {"greeted": name}}

    pi.register_tool(
        name="hello",
        label="Hello",
        description="Greets someone by name",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        execute=execute,
    )

    async def hello_command(args, ctx):
        await ctx.ui.notify(f"hello {args or 'world'}")

    pi.register_command("hello", description="Say hello", handler=hello_command)
