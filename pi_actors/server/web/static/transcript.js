// The transcript of one session: built from a subscription's snapshot, then kept up to date
// by its events (pi's AgentEvents in the wire form of pi_actors/protocol/events.py: deltas
// travel without `partial`, and are applied here to our own copy of the streaming message).
//
// Rendering is coalesced: events only change the model and mark what is dirty; the DOM is
// updated once per animation frame (and, for a very long streaming text whose Markdown takes
// long to render, less often: the next render waits three times as long as the last took),
// so a reply of tens of thousands of deltas never blocks the page.
//
// Every string from the session goes through markdown.js (sanitized) or a Text node.

import { codeBlock, markdown, text } from "./markdown.js";

function el(tag, cls, ...children) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  for (const child of children) {
    if (child == null) continue;
    node.appendChild(typeof child === "string" ? text(child) : child);
  }
  return node;
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && b.type === "text").map((b) => String(b.text || "")).join("");
}

function tryJson(s) {
  try { return JSON.parse(s); } catch (_) { return null; }
}

const LANGS = { py: "python", js: "javascript", ts: "typescript", sh: "bash", json: "json", md: "markdown",
  rs: "rust", go: "go", c: "c", h: "c", cpp: "cpp", java: "java", rb: "ruby", yml: "yaml", yaml: "yaml",
  toml: "ini", html: "xml", css: "css", sql: "sql" };

function langOf(path) {
  const m = /\.([A-Za-z0-9]+)$/.exec(String(path || ""));
  return m ? LANGS[m[1].toLowerCase()] : undefined;
}

function collapsible(summary, body, open) {
  const d = el("details", "fold", el("summary", null, summary), body);
  if (open) d.open = true;
  return d;
}

function lineCount(s) {
  const body = String(s || "").replace(/\n$/, "");
  return body ? body.split("\n").length : 0;
}

/** A diff (unified text, or pi's numbered lines "+12 text" / "-12 text" / " 12 text"), one
 *  row per line, + and - lines coloured. */
function diffView(diff) {
  const pre = el("pre", "diff");
  for (const line of String(diff).split("\n")) {
    const cls = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.appendChild(el("span", `diff-${cls}`, line + "\n"));
  }
  return pre;
}

export class Transcript {
  constructor(root, footer, onChange) {
    this.root = root;
    this.footer = footer;
    this.onChange = onChange || (() => {});
    this.toolViews = new Map(); // toolCallId -> {box, result}
    this.stream = null; // {message, view, blocks: [{kind, node, dirty}], buffers}
    this.dirty = false;
    this.frame = 0;
    this.nextRenderAt = 0;
    this.stats = { deltas: 0, renders: 0, firstPaint: null };
    this.messages = [];
    this.usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
  }

  // -- the model ---------------------------------------------------------------------------

  reset(snapshot) {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.root.replaceChildren();
    this.toolViews.clear();
    this.stream = null;
    this.messages = [];
    this.usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
    for (const message of snapshot.messages || []) this.addMessage(message);
    if (snapshot.streamMessage) this.beginStream(snapshot.streamMessage);
    for (const id of snapshot.pendingToolCalls || []) {
      const view = this.toolViews.get(id);
      if (view) view.box.classList.add("running");
    }
    this.renderFooter();
    this.scroll();
  }

  event(ev) {
    switch (ev.type) {
      case "message_start":
        if (ev.message && ev.message.role === "assistant") this.beginStream(ev.message);
        break;
      case "message_update":
        this.update(ev.assistantMessageEvent || {});
        break;
      case "message_end":
        if (ev.message && ev.message.role === "assistant" && this.stream) this.endStream(ev.message);
        else if (ev.message) this.addMessage(ev.message);
        break;
      case "tool_execution_start": {
        const view = this.toolViews.get(ev.toolCallId);
        if (view) view.box.classList.add("running");
        break;
      }
      case "tool_execution_update":
        this.setToolResult(ev.toolCallId, ev.toolName, ev.args, ev.partialResult, false, true);
        break;
      case "tool_execution_end":
        this.setToolResult(ev.toolCallId, ev.toolName, null, ev.result, ev.isError, false);
        break;
      case "compaction_start":
      case "auto_compaction_start":
        this.notice(`Compacting the session (${ev.reason || "manual"})…`);
        break;
      case "compaction_end":
      case "auto_compaction_end":
        this.notice(ev.aborted ? "Compaction aborted" : ev.errorMessage ? `Compaction failed: ${ev.errorMessage}` : "Compaction done");
        break;
      case "auto_retry_start":
        this.notice(`Retrying (${ev.attempt}/${ev.maxAttempts}): ${ev.errorMessage || ""}`);
        break;
      default:
        break;
    }
  }

  addMessage(message) {
    this.messages.push(message);
    const role = message.role;
    if (role === "assistant") {
      const view = this.assistantView(message);
      this.root.appendChild(view.node);
      for (const b of view.blocks) this.renderBlock(b, message);
      this.countUsage(message);
      this.renderFooter();
    } else if (role === "toolResult") {
      this.setToolResult(message.toolCallId, message.toolName, null, message, !!message.isError, false);
    } else if (role === "user") {
      this.root.appendChild(el("div", "msg user", el("div", "who", "You"), el("div", "body plain", contentText(message.content))));
    } else if (role === "compactionSummary" || role === "branchSummary") {
      const title = role === "compactionSummary"
        ? `Compaction summary${message.tokensBefore ? ` (${message.tokensBefore} tokens before)` : ""}`
        : "Branch summary";
      const body = el("div", "body md");
      body.appendChild(markdown(message.summary || ""));
      this.root.appendChild(el("div", `msg ${role === "compactionSummary" ? "compaction" : "branch-summary"}`, collapsible(title, body, false)));
    } else if (role === "bashExecution") {
      const out = el("pre", "output", String(message.output || ""));
      this.root.appendChild(el("div", "msg bash-exec", el("div", "who", `$ ${message.command || ""}`),
        collapsible(`output (${lineCount(message.output)} lines)`, out, lineCount(message.output) <= 10)));
    } else {
      const body = contentText(message.content) || JSON.stringify(message);
      this.root.appendChild(el("div", "msg custom", el("div", "who", String(role || message.customType || "message")), el("div", "body plain", body)));
    }
    this.scroll();
  }

  notice(s) {
    this.root.appendChild(el("div", "notice", s));
    this.scroll();
  }

  // -- streaming ---------------------------------------------------------------------------

  beginStream(message) {
    const copy = JSON.parse(JSON.stringify(message));
    copy.content = Array.isArray(copy.content) ? copy.content : [];
    const view = this.assistantView(copy);
    view.node.classList.add("streaming");
    this.root.appendChild(view.node);
    this.stream = { message: copy, view, buffers: new Map() };
    for (const b of view.blocks) b.dirty = true;
    this.schedule();
  }

  update(ame) {
    const s = this.stream;
    if (!s) return;
    if (ame.partial) {
      s.message = ame.partial;
      if (ame.type === "toolcall_start") s.buffers.delete(ame.contentIndex);
      this.syncBlocks();
      for (const b of s.view.blocks) b.dirty = true;
    } else {
      const i = ame.contentIndex;
      const block = s.message.content[i];
      if (!block) return;
      this.stats.deltas += 1;
      if (ame.type === "text_delta") block.text = (block.text || "") + ame.delta;
      else if (ame.type === "thinking_delta") block.thinking = (block.thinking || "") + ame.delta;
      else if (ame.type === "toolcall_delta") {
        const buf = (s.buffers.get(i) || "") + ame.delta;
        s.buffers.set(i, buf);
        block.argumentsText = buf;
        const parsed = tryJson(buf);
        if (parsed) block.arguments = parsed;
      }
      const vb = s.view.blocks[i];
      if (vb) vb.dirty = true;
    }
    this.schedule();
  }

  endStream(message) {
    const s = this.stream;
    this.stream = null;
    s.message = message;
    this.messages.push(message);
    this.syncBlocksOf(s.view, message);
    for (const b of s.view.blocks) this.renderBlock(b, message);
    s.view.node.classList.remove("streaming");
    this.renderStop(s.view, message);
    this.countUsage(message);
    this.renderFooter();
    this.scroll();
  }

  syncBlocks() {
    this.syncBlocksOf(this.stream.view, this.stream.message);
  }

  syncBlocksOf(view, message) {
    while (view.blocks.length < message.content.length) {
      const b = this.blockView(message.content[view.blocks.length]);
      b.index = view.blocks.length;
      view.body.appendChild(b.node);
      view.blocks.push(b);
    }
  }

  schedule() {
    this.dirty = true;
    if (this.frame) return;
    this.frame = requestAnimationFrame((t) => this.flush(t));
  }

  flush(now) {
    this.frame = 0;
    if (!this.dirty || !this.stream) return;
    if (now < this.nextRenderAt) {
      this.frame = requestAnimationFrame((t) => this.flush(t));
      return;
    }
    const started = performance.now();
    this.dirty = false;
    const s = this.stream;
    this.syncBlocks();
    for (const b of s.view.blocks) {
      if (b.dirty) {
        b.dirty = false;
        this.renderBlock(b, s.message);
      }
    }
    const cost = performance.now() - started;
    this.nextRenderAt = cost > 8 ? performance.now() + cost * 3 : 0;
    this.stats.renders += 1;
    if (this.stats.firstPaint === null && s.message.content.some((c) => (c.text || c.thinking || "").length)) {
      this.stats.firstPaint = performance.now();
    }
    this.scroll();
    this.onChange();
  }

  // -- views -------------------------------------------------------------------------------

  assistantView(message) {
    const body = el("div", "body");
    const node = el("div", "msg assistant", el("div", "who", "Assistant"), body);
    const view = { node, body, blocks: [] };
    for (const block of message.content || []) {
      const b = this.blockView(block);
      b.index = view.blocks.length;
      body.appendChild(b.node);
      view.blocks.push(b);
    }
    if (message.stopReason) this.renderStop(view, message);
    return view;
  }

  renderStop(view, message) {
    if (message.stopReason === "aborted") view.node.appendChild(el("div", "stop aborted", "Aborted"));
    else if (message.stopReason === "error") view.node.appendChild(el("div", "stop error", `Error: ${message.errorMessage || "the request failed"}`));
  }

  blockView(block) {
    const kind = block && block.type;
    if (kind === "thinking") {
      const inner = el("div", "md");
      const node = collapsible("Thinking", inner, false);
      node.classList.add("thinking");
      return { kind, node, inner };
    }
    if (kind === "toolCall") {
      const head = el("div", "tool-head");
      const args = el("div", "tool-args");
      const result = el("div", "tool-result");
      const node = el("div", "tool", head, args, result);
      const view = { kind, node, head, args, result, id: block.id };
      if (block.id) this.toolViews.set(block.id, { box: node, result, name: block.name, block });
      return view;
    }
    const inner = el("div", "md");
    return { kind: "text", node: inner, inner };
  }

  renderBlock(b, message) {
    const data = message.content[b.index] || {};
    if (b.kind === "thinking") {
      b.inner.replaceChildren(markdown(data.thinking || ""));
    } else if (b.kind === "toolCall") {
      b.head.replaceChildren(el("span", "tool-name", String(data.name || "tool")));
      b.args.replaceChildren(this.argsView(data));
      const entry = this.toolViews.get(data.id);
      if (data.id && !entry) this.toolViews.set(data.id, { box: b.node, result: b.result, name: data.name, block: data });
      else if (entry) entry.block = data;
    } else {
      b.inner.replaceChildren(markdown(data.text || ""));
    }
  }

  argsView(block) {
    const args = block.arguments && typeof block.arguments === "object" ? block.arguments : null;
    const name = block.name;
    if (!args) return el("pre", "args", String(block.argumentsText || ""));
    if (name === "bash") return el("pre", "args cmd", `$ ${String(args.command || "")}`);
    if (name === "read" || name === "ls" || name === "find" || name === "grep") {
      return el("div", "args path", `${String(args.path || args.pattern || "")}`);
    }
    if (name === "write") {
      const content = String(args.content || "");
      return el("div", "args", el("div", "path", String(args.path || "")),
        collapsible(`written file (${lineCount(content)} lines)`, codeBlock(content, langOf(args.path)), lineCount(content) <= 20));
    }
    if (name === "edit") {
      const edits = Array.isArray(args.edits) ? args.edits : [{ oldText: args.oldText, newText: args.newText }];
      const box = el("div", "args", el("div", "path", String(args.path || "")));
      for (const e of edits) {
        const lines = [];
        for (const l of String(e.oldText || "").split("\n")) lines.push(`-${l}`);
        for (const l of String(e.newText || "").split("\n")) lines.push(`+${l}`);
        box.appendChild(diffView(lines.join("\n")));
      }
      return box;
    }
    return el("pre", "args", JSON.stringify(args, null, 2));
  }

  setToolResult(id, name, _args, result, isError, partial) {
    const entry = this.toolViews.get(id);
    const content = result && typeof result === "object" ? contentText(result.content) : String(result == null ? "" : result);
    const box = el("div", isError ? "result error" : "result");
    const n = lineCount(content);
    const toolName = (entry && entry.name) || name;
    if (toolName === "edit" && result && result.details && result.details.diff && !isError) {
      box.appendChild(collapsible("diff", diffView(result.details.diff), true));
    } else if (content) {
      const title = toolName === "bash" ? `output (${n} lines)` : `result (${n} lines)`;
      box.appendChild(collapsible(title, el("pre", "output", content), n <= 10 || partial));
    }
    if (entry) {
      entry.result.replaceChildren(box);
      if (!partial) entry.box.classList.remove("running");
      if (isError) entry.box.classList.add("failed");
    } else {
      const node = el("div", "tool orphan", el("div", "tool-head", el("span", "tool-name", String(name || "tool"))), box);
      this.root.appendChild(node);
    }
    this.scroll();
  }

  // -- footer ------------------------------------------------------------------------------

  countUsage(message) {
    const u = message.usage;
    if (!u) return;
    this.usage.input += u.input || 0;
    this.usage.output += u.output || 0;
    this.usage.cacheRead += u.cacheRead || 0;
    this.usage.cacheWrite += u.cacheWrite || 0;
    this.usage.cost += (u.cost && u.cost.total) || 0;
  }

  renderFooter() {
    if (!this.footer) return;
    const u = this.usage;
    const parts = [`↑${u.input}`, `↓${u.output}`];
    if (u.cacheRead) parts.push(`R${u.cacheRead}`);
    if (u.cacheWrite) parts.push(`W${u.cacheWrite}`);
    parts.push(`$${u.cost.toFixed(3)}`);
    this.footer.textContent = parts.join(" ");
  }

  scroll() {
    const r = this.root;
    if (r.scrollHeight - r.scrollTop - r.clientHeight < 200) r.scrollTop = r.scrollHeight;
  }
}
