// Server-sent events over fetch, so the token travels in a header (EventSource cannot send one).
// A dropped connection is resumed with Last-Event-ID: the id of the last chunk seen, so no chunk
// is shown twice and none is missed (the service numbers chunks by stream sequence).
import { authHeaders } from "./api.js";

function parseEvent(block) {
  const event = { event: "message", data: [], id: null };
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event.event = value;
    else if (field === "data") event.data.push(value);
    else if (field === "id") event.id = value;
  }
  return event.data.length || event.event !== "message" ? { ...event, data: event.data.join("\n") } : null;
}

/**
 * Follow `url` from after `lastEventId`; `onEvent({event, data, id})` for each event.
 * Returns a handle: `stop()`, `drop()` (cut the connection as a network failure would: it resumes),
 * `lastEventId`, `reconnects`, and `state` ("open", "retrying", "ended", "stopped", "refused").
 */
export function follow(url, lastEventId, onEvent, onState = () => {}) {
  const handle = { lastEventId, reconnects: 0, state: "open", controller: null };
  let stopped = false;
  const setState = (state) => {
    handle.state = state;
    onState(state, handle);
  };

  async function once() {
    const controller = new AbortController();
    handle.controller = controller;
    const headers = authHeaders({ Accept: "text/event-stream" });
    if (handle.lastEventId !== null && handle.lastEventId !== undefined) headers["Last-Event-ID"] = String(handle.lastEventId);
    const response = await fetch(url, { headers, signal: controller.signal, cache: "no-store" });
    if (response.status === 401 || response.status === 404) {
      setState("refused");
      return "final";
    }
    if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
    setState("open");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "dropped";
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = parseEvent(block);
        if (!event) continue;
        if (event.id !== null) handle.lastEventId = event.id;
        onEvent(event);
        if (event.event === "end" || event.event === "fail") return "final";
      }
    }
  }

  (async () => {
    while (!stopped) {
      let outcome;
      try {
        outcome = await once();
      } catch (err) {
        outcome = "dropped";
      }
      if (stopped) break;
      if (outcome === "final") {
        if (handle.state !== "refused") setState("ended");
        return;
      }
      handle.reconnects += 1;
      setState("retrying");
      await new Promise((resolve) => setTimeout(resolve, Math.min(500 * handle.reconnects, 3000)));
    }
  })();

  handle.stop = () => {
    stopped = true;
    setState("stopped");
    if (handle.controller) handle.controller.abort();
  };
  handle.drop = () => {
    if (handle.controller) handle.controller.abort();
  };
  return handle;
}
