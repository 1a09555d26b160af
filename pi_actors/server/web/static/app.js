// Placeholder client (the web-client helper replaces it): asks who is signed in, then opens
// the WebSocket with the pi-actors.json subprotocol and says hello (docs/web.md).
"use strict";

async function main() {
  const status = document.getElementById("status");
  const who = await fetch("/api/whoami", { credentials: "same-origin" });
  if (!who.ok) {
    status.textContent = "not signed in";
    return;
  }
  const me = await who.json();
  document.getElementById("signin").hidden = true;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}/`, "pi-actors.json");
  ws.onopen = () => {
    ws.send(JSON.stringify({
      type: "hello", protocol: "pi-actors", min_version: 2, max_version: 2,
      role: "ui", name: "web", codecs: ["json"],
    }));
  };
  ws.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "hello_ok") status.textContent = `connected as ${me.name}`;
    else if (message.type === "hello_error") status.textContent = `refused: ${message.message}`;
  };
  ws.onclose = () => { if (status.textContent.startsWith("connected")) status.textContent = "disconnected"; };
}

main();
