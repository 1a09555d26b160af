// The pi-actors protocol over a browser WebSocket (proto/PROTOCOL.md, JSON codec).
//
// One envelope per text message, in JSON (WebSocket subprotocol "pi-actors.json"); the
// envelope and the methods are the CBOR protocol's. The page is an ordinary client: it sends
// `hello`, then calls; every call gets chunks and exactly one result; on version 2 it grants
// chunk credit in batches of 16 as it consumes them. When the connection drops, every call in
// flight fails locally with code "connection_lost": its outcome is unknown (nothing is
// retried here — the caller decides, as `pi-actors attach` does).
//
// Usage:
//   const conn = await Connection.open(url);          // rejects when the socket or hello fails
//   const value = await conn.call("list", {});        // RemoteError on ok:false
//   const call = conn.stream("subscribe", args, target, chunk => ...);
//   await call.result;  call.cancel();
//   conn.onclose = reason => ...;                     // once, after the socket is gone

export const SUBPROTOCOL = "pi-actors.json";
const CREDIT_BATCH = 16;

export class RemoteError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

export class Connection {
  static open(url, { name = "web", timeoutMs = 10000 } = {}) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(url, [SUBPROTOCOL]);
      } catch (err) {
        reject(new RemoteError("connection_lost", String(err)));
        return;
      }
      const conn = new Connection(ws);
      let settled = false;
      const timer = setTimeout(() => fail("the server did not answer the hello in time"), timeoutMs);
      function fail(why) {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        try { ws.close(); } catch (_) { /* already closed */ }
        reject(new RemoteError("connection_lost", why));
      }
      ws.onopen = () => {
        ws.send(JSON.stringify({
          type: "hello", protocol: "pi-actors", min_version: 1, max_version: 2,
          role: "ui", name, codecs: ["json"],
        }));
      };
      ws.onerror = () => fail("the connection could not be opened");
      ws.onclose = () => fail("the connection closed before the handshake");
      ws.onmessage = (ev) => {
        let msg;
        try { msg = JSON.parse(ev.data); } catch (_) { fail("the server sent a message that is not JSON"); return; }
        if (msg.type === "hello_ok") {
          settled = true;
          clearTimeout(timer);
          conn.version = msg.version;
          conn._attach();
          resolve(conn);
        } else if (msg.type === "hello_error") {
          fail(`${msg.code}: ${msg.message}`);
        } else {
          fail(`unexpected first message ${String(msg.type)}`);
        }
      };
    });
  }

  constructor(ws) {
    this.ws = ws;
    this.version = 1;
    this.nextId = 1;
    this.calls = new Map();
    this.closed = false;
    this.onclose = null;
  }

  _attach() {
    this.ws.onmessage = (ev) => this._receive(ev.data);
    this.ws.onerror = () => {};
    this.ws.onclose = () => this._lost("the connection to the server was lost");
  }

  _lost(why) {
    if (this.closed) return;
    this.closed = true;
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const call of calls) call.reject(new RemoteError("connection_lost", `${why}: outcome unknown`));
    if (this.onclose) this.onclose(why);
  }

  close() {
    try { this.ws.close(); } catch (_) { /* gone */ }
    this._lost("closed");
  }

  _send(obj) {
    if (this.closed) throw new RemoteError("connection_lost", "not connected");
    this.ws.send(JSON.stringify(obj));
  }

  _receive(text) {
    let msg;
    try { msg = JSON.parse(text); } catch (_) { this._fatal("a message that is not JSON"); return; }
    if (msg.type === "chunk") {
      const call = this.calls.get(msg.id);
      if (!call || msg.seq !== call.seq) { this._fatal(`chunk out of sequence for call ${msg.id}`); return; }
      call.seq += 1;
      if (this.version >= 2 && call.seq % CREDIT_BATCH === 0) this._send({ type: "credit", id: msg.id, n: CREDIT_BATCH });
      if (call.onChunk) {
        try { call.onChunk(msg.data === undefined ? null : msg.data); } catch (err) { console.error(err); }
      }
    } else if (msg.type === "result") {
      const call = this.calls.get(msg.id);
      if (!call) { this._fatal(`result for call ${msg.id} not in flight`); return; }
      this.calls.delete(msg.id);
      if (msg.ok) call.resolve(msg.value === undefined ? null : msg.value);
      else call.reject(new RemoteError((msg.error && msg.error.code) || "internal", msg.error && msg.error.message));
    } else if (msg.type === "call") {
      // The server never calls a UI connection's methods except $ping.
      const answer = msg.method === "$ping"
        ? { type: "result", id: msg.id, ok: true }
        : { type: "result", id: msg.id, ok: false, error: { code: "not_found", message: `no method ${msg.method}` } };
      this._send(answer);
    } else if (msg.type === "hello_error") {
      this._lost(`${msg.code}: ${msg.message}`);
      try { this.ws.close(); } catch (_) { /* gone */ }
    }
    // cancel/credit for our side: we serve no streams; unknown types are ignored.
  }

  _fatal(why) {
    try { this._send({ type: "hello_error", code: "invalid_request", message: why }); } catch (_) { /* gone */ }
    try { this.ws.close(); } catch (_) { /* gone */ }
    this._lost(why);
  }

  _start(method, args, target, onChunk) {
    const id = this.nextId++;
    let resolve, reject;
    const result = new Promise((res, rej) => { resolve = res; reject = rej; });
    this.calls.set(id, { resolve, reject, onChunk, seq: 0 });
    const envelope = { type: "call", id, method };
    if (args !== undefined && args !== null) envelope.args = args;
    if (target) envelope.target = target;
    try {
      this._send(envelope);
    } catch (err) {
      this.calls.delete(id);
      reject(err);
    }
    return { id, result };
  }

  /** A call whose chunks (if any) are ignored; resolves to its result value. */
  call(method, args = {}, target = "") {
    return this._start(method, args, target, null).result;
  }

  /** A streaming call: onChunk(data) per chunk; `result` settles with the result;
   *  cancel() asks the server to stop it (its result still comes). */
  stream(method, args, target, onChunk) {
    const { id, result } = this._start(method, args, target, onChunk);
    return {
      id,
      result,
      cancel: () => {
        if (this.calls.has(id)) { try { this._send({ type: "cancel", id }); } catch (_) { /* gone */ } }
      },
    };
  }
}
