// DOM helpers: every text from the service goes in with textContent, never as HTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function time(ms) {
  if (ms === null || ms === undefined) return "-";
  const d = new Date(ms);
  return d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "-";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function cost(usd) {
  if (usd === null || usd === undefined) return "-";
  return usd === 0 ? "$0" : `$${usd.toFixed(usd < 0.01 ? 5 : 3)}`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function badge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}

/** One transcript message: user, assistant (text, tool calls, thinking collapsed), tool result. */
export function message(m) {
  const role = m.role;
  const parts = [h("div", { class: "role" }, role === "tool" ? `tool result · ${m.tool_name}` : role)];
  if (role === "tool" && m.metadata && m.metadata.outcome_unknown) {
    // A not-retry-safe call whose worker died mid-call: it may or may not have taken effect.
    parts[0].append(" ", h("span", { class: "badge outcome-unknown", title: `idempotency key ${m.metadata.idempotency_key ?? ""}` }, "outcome unknown"));
  }
  if (role === "assistant" && m.thinking) {
    parts.push(h("details", { class: "thinking" }, h("summary", {}, "thinking"), h("pre", {}, m.thinking.content)));
  }
  if (m.content) parts.push(h("div", { class: "content" }, m.content));
  if (role === "assistant" && m.tool_calls) {
    for (const call of m.tool_calls) {
      parts.push(h("div", { class: "tool-call" }, h("code", {}, call.name), h("pre", {}, json(call.arguments))));
    }
  }
  return h("li", { class: `msg msg-${role}` }, parts);
}

/** A rendered message labelled with its position in the transcript (#0 is the first), so a
 * message in "What the model saw" can be found in the transcript beside it. */
export function numbered(li, index) {
  li.dataset.transcriptIndex = String(index);
  li.querySelector(".role").prepend(h("span", { class: "index" }, `#${index} `));
  return li;
}
