// The pi-actors web client: a peer of `pi-actors attach` (pi_actors/cli/attach.py,
// pi_actors/server/remote_ui.py) in a browser tab.
//
// - Sign-in is a plain form POST to /login; the server answers with an HttpOnly cookie the
//   WebSocket upgrade then carries. The page never sees or stores the token.
// - The server's methods (`list`, `create`, `attach`, `detach`) and the session's
//   (`subscribe`, `prompt`, `steer`, `follow_up`, `abort`, `set_model`, ... with target =
//   the session id and the attachment id in the arguments) over rpc.js: one WebSocket to
//   this page's own origin, WebSocket subprotocol pi-actors.json (the JSON codec, docs/web.md).
// - The transcript comes from the subscription only: a snapshot (seq N), then updates
//   N+1, N+2, ... A gap or an `overflow` end: subscribe again (a redraw from a new
//   snapshot). So every tab on a session sees the same events, whichever tab prompted.
// - A dropped connection: reconnect with back-off (0.2 s doubling to 5 s), attach the same
//   session again and redraw from the snapshot. A prompt in flight when it dropped is shown
//   as "outcome unknown" and never re-sent.

import { Connection, RemoteError } from "./rpc.js";
import { Transcript } from "./transcript.js";
import { markdown, text } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const BACKOFF = [200, 5000];
// The session this tab shows (its id, not a secret), kept across a sign-in's page reload.
const SESSION_KEY = "pi-actors.session";
const THINKING = ["off", "minimal", "low", "medium", "high", "xhigh"];

const state = {
  conn: null,
  everConnected: false,
  delay: BACKOFF[0],
  sessionId: null, // the session this tab shows (kept across reconnects)
  attachmentId: null,
  sub: null, // the subscribe call
  seq: null,
  streaming: false,
  promptCall: null, // {text} of a prompt of this tab in flight
  unknown: [], // "outcome unknown" notes, shown again after a redraw until the next prompt
  transcript: null,
  models: [],
  toolHosts: [],
};

// Exposed for tests and benchmarks: the state, the transcript (its counters), its class and
// the sanitizing Markdown renderer.
window.piActors = { state, Transcript, markdown };

function wsUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/`;
}

function setStatus(s, bad = false) {
  const node = $("conn-status");
  node.textContent = s;
  node.classList.toggle("bad", bad);
  document.body.dataset.connection = state.conn ? "up" : bad ? "down" : "connecting";
}

function show(section) {
  for (const id of ["signin", "sessions", "session"]) $(id).hidden = id !== section;
  document.body.dataset.view = section;
}

function errorText(err) {
  if (err instanceof RemoteError) return `${err.message} (${err.code})`;
  return String(err && err.message ? err.message : err);
}

// -- connection ------------------------------------------------------------------------------

/** The signed-in identity ({name, role}), null when not signed in (401), or undefined when
 *  the server could not be asked (it is down). */
async function whoami() {
  try {
    const r = await fetch("/api/whoami", { credentials: "same-origin", cache: "no-store" });
    if (r.status === 401) return null;
    if (!r.ok) return undefined;
    return await r.json();
  } catch (_) {
    return undefined;
  }
}

function askSignIn(note) {
  setStatus("not signed in", true);
  $("signin-note").textContent = note;
  $("logout-form").hidden = true;
  show("signin");
  $("token").focus();
}

async function connect() {
  setStatus(state.everConnected ? "reconnecting…" : "connecting…");
  const who = await whoami();
  if (who === null) {
    // No sign-in, or it ended (expired, signed out, or the server restarted: sign-ins live in
    // its memory). The form posts the token; the page comes back with the cookie and, from
    // sessionStorage, the session this tab was showing.
    askSignIn(state.everConnected ? "The server asks you to sign in again (it restarted, or your sign-in expired)." : "");
    return;
  }
  let conn;
  try {
    if (who === undefined) throw new RemoteError("connection_lost", "the server does not answer");
    conn = await Connection.open(wsUrl());
  } catch (err) {
    retryLater(errorText(err));
    return;
  }
  state.conn = conn;
  state.everConnected = true;
  state.delay = BACKOFF[0];
  setStatus(`connected as ${who.name} (${who.role})`);
  $("logout-form").hidden = false;
  conn.onclose = (why) => {
    if (state.conn !== conn) return;
    state.conn = null;
    state.sub = null;
    state.attachmentId = null;
    if (state.promptCall) outcomeUnknown();
    retryLater(why);
  };
  if (state.sessionId) {
    try {
      await attach(state.sessionId);
    } catch (err) {
      if (err instanceof RemoteError && err.code === "connection_lost") return; // onclose retries
      if (err instanceof RemoteError && ["session_terminated", "server_draining", "startup_failed"].includes(err.code)) {
        conn.close();
        return;
      }
      forgetSession();
      await showSessions(`Could not attach: ${errorText(err)}`);
    }
  } else {
    await showSessions();
  }
}

function retryLater(why) {
  const delay = state.delay;
  state.delay = Math.min(state.delay * 2, BACKOFF[1]);
  setStatus(`disconnected (${why}); reconnecting in ${(delay / 1000).toFixed(1)} s`, true);
  setTimeout(connect, delay);
}

function outcomeUnknown() {
  const call = state.promptCall;
  state.promptCall = null;
  state.unknown.push(`Connection lost while the prompt "${call.text.slice(0, 80)}" was running: outcome unknown (not re-sent).`);
  showUnknown();
  setRunning(false);
}

function showUnknown() {
  for (const s of state.unknown) {
    const note = document.createElement("div");
    note.className = "notice unknown";
    note.appendChild(text(s));
    $("transcript").appendChild(note);
  }
}

// -- sessions --------------------------------------------------------------------------------

async function showSessions(error = "") {
  show("sessions");
  $("sessions-error").textContent = error;
  await refreshSessions();
}

async function refreshSessions() {
  const conn = state.conn;
  if (!conn) return;
  let listed;
  try {
    listed = await conn.call("list", {});
  } catch (err) {
    $("sessions-error").textContent = `list failed: ${errorText(err)}`;
    return;
  }
  const rows = $("session-rows");
  rows.replaceChildren();
  for (const s of listed.sessions) {
    const tr = document.createElement("tr");
    tr.dataset.sessionId = s.id;
    const cells = [s.id, s.cwd, s.toolHost || "local", s.live ? `live, ${s.attachments} attached` : "on disk", s.owner];
    for (const [i, c] of cells.entries()) {
      const td = document.createElement("td");
      if (i === 0) {
        const code = document.createElement("code");
        code.appendChild(text(c));
        td.appendChild(code);
      } else td.appendChild(text(c));
      tr.appendChild(td);
    }
    const td = document.createElement("td");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "attach";
    button.textContent = "Attach";
    button.addEventListener("click", () => openSession(s.id));
    td.appendChild(button);
    tr.appendChild(td);
    rows.appendChild(tr);
  }
  $("no-sessions").hidden = listed.sessions.length > 0;
  state.toolHosts = listed.toolHosts || [];
  const select = $("create-tool-host");
  select.replaceChildren(new Option("(local sandbox)", ""));
  for (const h of state.toolHosts) select.appendChild(new Option(h.name, h.name));
}

async function createSession(ev) {
  ev.preventDefault();
  const conn = state.conn;
  if (!conn) return;
  const args = {};
  const cwd = $("create-cwd").value.trim();
  const toolHost = $("create-tool-host").value;
  if (cwd) args.cwd = cwd;
  if (toolHost) args.toolHost = toolHost;
  $("sessions-error").textContent = "";
  $("create-button").disabled = true;
  try {
    const { sessionId } = await conn.call("create", args);
    await openSession(sessionId, { model: $("create-model").value.trim(), thinking: $("create-thinking").value });
  } catch (err) {
    $("sessions-error").textContent = `create failed: ${errorText(err)}`;
  } finally {
    $("create-button").disabled = false;
  }
}

async function openSession(sessionId, settings = {}) {
  try {
    await attach(sessionId);
  } catch (err) {
    $("sessions-error").textContent = `attach failed: ${errorText(err)}`;
    return;
  }
  if (settings.model) await setModel(settings.model);
  if (settings.thinking) await setThinking(settings.thinking);
}

async function attach(sessionId) {
  const conn = state.conn;
  const { attachmentId } = await conn.call("attach", { sessionId });
  state.sessionId = sessionId;
  state.attachmentId = attachmentId;
  sessionStorage.setItem(SESSION_KEY, sessionId);
  document.body.dataset.sessionId = sessionId;
  $("session-title").textContent = sessionId;
  show("session");
  $("tree-view").hidden = true;
  subscribe();
  loadModels();
}

function forgetSession() {
  state.sessionId = null;
  state.attachmentId = null;
  sessionStorage.removeItem(SESSION_KEY);
  delete document.body.dataset.sessionId;
}

function sessionCall(method, args = {}) {
  if (!state.conn || !state.attachmentId) return Promise.reject(new RemoteError("connection_lost", "not connected"));
  return state.conn.call(method, { ...args, attachmentId: state.attachmentId }, state.sessionId);
}

async function detach() {
  const conn = state.conn;
  if (state.sub) state.sub.cancel();
  state.sub = null;
  forgetSession();
  if (conn) {
    try { await conn.call("detach", {}); } catch (_) { /* the list shows what is left */ }
    await showSessions();
  }
}

// -- the subscription ------------------------------------------------------------------------

function subscribe() {
  const conn = state.conn;
  if (state.sub) state.sub.cancel();
  state.seq = null;
  const sub = conn.stream("subscribe", { attachmentId: state.attachmentId, maxQueue: 4096 }, state.sessionId, (update) => {
    if (state.sub !== sub) return;
    if (update.snapshot) {
      state.seq = update.snapshot.seq;
      applySnapshot(update.snapshot);
      return;
    }
    if (state.seq === null || update.seq !== state.seq + 1) {
      subscribe(); // a lost update: start over from a new snapshot
      return;
    }
    state.seq = update.seq;
    applyEvent(update.event);
  });
  state.sub = sub;
  sub.result.then(
    () => { if (state.sub === sub && state.conn === conn) subscribe(); },
    (err) => {
      if (state.sub !== sub) return;
      if (err.code === "overflow") subscribe();
      else if (err.code === "actor_died") {
        // The session's runtime was lost (its node died) and the server is reopening it
        // from its file: a new subscription waits for it and starts from a new snapshot.
        setStatus(`session reopening: ${errorText(err)}`);
        subscribe();
      } else if (err.code === "session_terminated" && state.conn === conn) conn.close(); // reconnect re-attaches
      else if (err.code !== "connection_lost" && err.code !== "cancelled") setStatus(`subscription ended: ${errorText(err)}`, true);
    },
  );
}

function applySnapshot(snap) {
  state.transcript.reset(snap);
  showUnknown();
  setRunning(!!snap.isStreaming);
  showModel(snap.model, snap.thinkingLevel);
  document.body.dataset.snapshots = String(Number(document.body.dataset.snapshots || 0) + 1);
}

function applyEvent(ev) {
  if (!ev) return;
  state.transcript.event(ev);
  if (ev.type === "agent_start") setRunning(true);
  else if (ev.type === "agent_end") setRunning(false);
  else if (ev.type === "queue_update") {
    const n = (ev.steering || []).length + (ev.followUp || []).length;
    $("queue").textContent = n ? `Queued: ${[...(ev.steering || []), ...(ev.followUp || [])].join(" · ")}` : "";
  } else if (ev.type === "compaction_end" && ev.result) {
    subscribe(); // the transcript was reloaded from the file: redraw from a snapshot
  }
}

function setRunning(running) {
  state.streaming = running;
  document.body.dataset.running = running ? "yes" : "no";
  $("send").textContent = running ? "Steer" : "Send";
  $("follow-up").hidden = !running;
  $("abort").hidden = !running;
  $("run-state").textContent = running ? "● running" : "";
  if (!running) $("queue").textContent = "";
}

// -- the editor ------------------------------------------------------------------------------

async function send(kind) {
  const box = $("prompt");
  const value = box.value;
  if (!value.trim() || !state.conn) return;
  box.value = "";
  if (kind === "prompt" && state.streaming) kind = "steer";
  if (kind === "prompt") {
    state.unknown = [];
    const call = { text: value };
    state.promptCall = call;
    setRunning(true);
    try {
      await sessionCall("prompt", { text: value, events: false });
    } catch (err) {
      if (err.code !== "connection_lost") state.transcript.notice(`prompt failed: ${errorText(err)}`);
    } finally {
      if (state.promptCall === call) state.promptCall = null;
    }
    return;
  }
  try {
    await sessionCall(kind === "steer" ? "steer" : "follow_up", { text: value });
  } catch (err) {
    state.transcript.notice(`${kind} failed: ${errorText(err)}`);
  }
}

async function abort() {
  try {
    await sessionCall("abort", {});
  } catch (err) {
    state.transcript.notice(`abort failed: ${errorText(err)}`);
  }
}

// -- model and thinking ----------------------------------------------------------------------

function modelKey(m) {
  return m ? `${m.provider}/${m.id}` : "";
}

function showModel(model, thinking) {
  const select = $("model-select");
  const key = modelKey(model);
  if (key && ![...select.options].some((o) => o.value === key)) select.appendChild(new Option(key, key));
  select.value = key;
  if (thinking) $("thinking-select").value = thinking;
  $("model-label").textContent = `${key || "(no model)"} · thinking ${thinking || "off"}`;
}

async function loadModels() {
  try {
    const { models } = await sessionCall("get_available_models", {});
    state.models = models;
    const select = $("model-select");
    const current = select.value;
    select.replaceChildren();
    const options = $("model-options");
    options.replaceChildren();
    for (const m of models) {
      const key = modelKey(m);
      select.appendChild(new Option(key, key));
      options.appendChild(new Option(key, key));
    }
    if (current && ![...select.options].some((o) => o.value === current)) select.appendChild(new Option(current, current));
    select.value = current;
  } catch (_) { /* the select keeps the session's own model */ }
}

async function setModel(key) {
  const slash = key.indexOf("/");
  if (slash < 0) {
    state.transcript.notice(`model "${key}": write provider/model`);
    return;
  }
  try {
    const model = await sessionCall("set_model", { provider: key.slice(0, slash), modelId: key.slice(slash + 1) });
    const st = await sessionCall("get_state", {});
    showModel(model, st.thinkingLevel);
  } catch (err) {
    state.transcript.notice(`set model failed: ${errorText(err)}`);
  }
}

async function setThinking(level) {
  if (!THINKING.includes(level)) return;
  try {
    const { level: applied } = await sessionCall("set_thinking_level", { level });
    const st = await sessionCall("get_state", {});
    showModel(st.model, applied);
  } catch (err) {
    state.transcript.notice(`set thinking failed: ${errorText(err)}`);
  }
}

// -- tree and compaction (read-only views) ---------------------------------------------------

function entryText(e) {
  const m = e.message;
  if (m) {
    const c = m.content;
    const t = typeof c === "string" ? c : Array.isArray(c) ? c.filter((b) => b.type === "text").map((b) => b.text).join("") : "";
    if (m.role === "toolResult") return `[${m.toolName || "tool"} result]`;
    if (m.role === "assistant" && !t) return `[assistant: ${(c || []).filter((b) => b.type === "toolCall").map((b) => b.name).join(", ")}]`;
    return `${m.role}: ${t}`;
  }
  if (e.type === "compaction") return `[compaction: ${String(e.summary || "").slice(0, 80)}]`;
  if (e.type === "branch_summary") return `[branch summary: ${String(e.summary || "").slice(0, 80)}]`;
  if (e.type === "model_change") return `[model: ${e.provider}/${e.modelId}]`;
  if (e.type === "thinking_level_change") return `[thinking: ${e.thinkingLevel}]`;
  return `[${e.type}]`;
}

async function showTree() {
  let tree;
  try {
    tree = await sessionCall("tree", {});
  } catch (err) {
    state.transcript.notice(`tree failed: ${errorText(err)}`);
    return;
  }
  const children = new Map();
  for (const e of tree.entries) {
    const p = e.parentId || null;
    if (!children.has(p)) children.set(p, []);
    children.get(p).push(e);
  }
  // A chain of single children stays flat; only a fork indents (as pi's /tree). Iterative:
  // a session of thousands of entries is a chain thousands deep.
  const root = document.createElement("ul");
  const stack = [[children.get(null) || [], root]];
  while (stack.length) {
    let [kids, target] = stack.pop();
    while (kids.length === 1) {
      target.appendChild(entryItem(kids[0], tree));
      kids = children.get(kids[0].id) || [];
    }
    for (const e of kids) {
      const sub = document.createElement("ul");
      sub.className = "branch";
      target.appendChild(sub);
      stack.push([[e], sub]);
    }
  }
  $("tree-list").replaceChildren(...root.childNodes);
  $("tree-view").hidden = false;
}

function entryItem(e, tree) {
  const li = document.createElement("li");
  li.dataset.entryId = e.id;
  if (e.id === tree.leafId) li.className = "leaf";
  const span = document.createElement("span");
  span.appendChild(text(entryText(e).slice(0, 200)));
  li.appendChild(span);
  const label = tree.labels && tree.labels[e.id];
  if (label) {
    const l = document.createElement("span");
    l.className = "label";
    l.appendChild(text(` [${label}]`));
    li.appendChild(l);
  }
  return li;
}


async function compact() {
  try {
    await sessionCall("compact", {});
  } catch (err) {
    state.transcript.notice(`compact failed: ${errorText(err)}`);
  }
}

// -- wiring ----------------------------------------------------------------------------------

function init() {
  state.transcript = new Transcript($("transcript"), $("usage"));
  window.piActors.transcript = state.transcript;
  $("create-form").addEventListener("submit", createSession);
  $("refresh").addEventListener("click", () => refreshSessions());
  $("detach").addEventListener("click", () => detach());
  $("editor").addEventListener("submit", (ev) => { ev.preventDefault(); send("prompt"); });
  $("prompt").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send("prompt"); }
  });
  $("follow-up").addEventListener("click", () => send("follow_up"));
  $("abort").addEventListener("click", () => abort());
  $("model-select").addEventListener("change", (ev) => setModel(ev.target.value));
  $("thinking-select").addEventListener("change", (ev) => setThinking(ev.target.value));
  $("show-tree").addEventListener("click", () => showTree());
  $("close-tree").addEventListener("click", () => { $("tree-view").hidden = true; });
  $("compact").addEventListener("click", () => compact());
  setRunning(false);
  state.sessionId = sessionStorage.getItem(SESSION_KEY);
  connect();
}

init();
