// Drives `pi-actors --mode rpc` with pi's own RpcClient (from the npm package), unchanged.
// RpcClient always starts `node <cliPath> --mode rpc ...`, so cliPath is shim.cjs, which
// execs pi-actors with the same arguments. Run through ../check-pi-rpc-client.
const [clientPath, cwd] = process.argv.slice(2);
const { RpcClient } = await import(clientPath);
const client = new RpcClient({ cliPath: new URL("./shim.cjs", import.meta.url).pathname, model: process.env.PI_RPC_MODEL, args: ["--no-session"], cwd });
const check = (ok, what) => { console.log(`${ok ? "ok  " : "FAIL"} ${what}`); if (!ok) process.exitCode = 1; };
await client.start();
const events = await client.promptAndWait("Hello from pi's RpcClient");
const kinds = events.map((e) => e.type);
check(kinds[0] === "agent_start" && kinds.at(-1) === "agent_end", `promptAndWait: ${events.length} events, agent_start … agent_end`);
const state = await client.getState();
check(state.isStreaming === false && state.messageCount === 2, `getState: ${state.messageCount} messages, not streaming`);
check(typeof (await client.getLastAssistantText()) === "string", "getLastAssistantText");
check((await client.getSessionStats()).assistantMessages === 1, "getSessionStats");
try { await client.setModel("nope", "missing"); check(false, "setModel refuses an unknown model"); }
catch (e) { check(/Model not found/.test(e.message), `setModel error keeps its id: ${e.message}`); }
check((await client.bash("echo from-node")).output === "from-node\n", "bash");
check((await client.getMessages()).length === 3, "getMessages");
await client.stop();
