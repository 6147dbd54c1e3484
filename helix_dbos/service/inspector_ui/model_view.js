// "What the model saw" at one step (GET .../model-view), shown beside the transcript. Compaction
// never rewrites the transcript: once a session is long, what the model was sent differs from it
// (older turns dropped or summarised, old tool results cleared), and debugging an answer needs
// both. Every text goes in through h() (textContent): model text is never parsed as HTML.
import { api, ApiError } from "./api.js";
import { h, message, numbered } from "./render.js";

const REASONS = {
  tokens: (c) => `the view counted ${c.tokens_before} tokens, over the policy's limit`,
  context_window: () => "the provider refused the call for its context window",
};

// replaceChildren() would show a null as the text "null": the parts a view does not have are left out.
function show(panel, ...parts) {
  panel.replaceChildren(...parts.filter((part) => part !== null && part !== undefined));
}

function heading(label) {
  return h("h3", { id: "model-view-title", tabindex: "-1" }, `At ${label}`);
}

function mark(text, title) {
  return h("span", { class: "badge mark", title }, text);
}

/** One message the model was sent, marked when it is not a transcript message as it stands. */
function sentMessage(item, dropped) {
  if (item.kind === "summary") {
    return h("li", { class: "msg msg-summary", "data-kind": "summary" },
      h("div", { class: "role" }, "system ", mark("summary", "Written by the compaction; not a transcript message"),
        ` of ${dropped} earlier message(s)`),
      h("div", { class: "content" }, item.message.content));
  }
  const li = numbered(message(item.message), item.transcript_index);
  li.dataset.kind = item.kind;
  const role = li.querySelector(".role");
  if (item.kind === "cleared_tool_result") {
    li.classList.add("msg-cleared");
    role.append(" ", mark("cleared", "The model saw this placeholder instead of the tool's result"));
  }
  return li;
}

function compactionFacts(c, view) {
  const why = (REASONS[c.reason] || (() => c.reason))(c);
  return h("dl", { class: "kv", "aria-label": "Compaction in effect" },
    h("dt", {}, "Compacted"), h("dd", {}, `when the transcript had ${c.transcript_length} message(s): ${why}`),
    h("dt", {}, "Not verbatim"), h("dd", {}, c.cut ? `transcript messages #0–#${c.cut - 1}${c.summary ? ", summarised" : ", dropped"}` : "none"),
    h("dt", {}, "Cleared"), h("dd", {}, c.cleared_until > c.cut ? `tool results before #${c.cleared_until}` : "none"),
    c.summary_error ? [h("dt", {}, "Summary failed"), h("dd", {}, c.summary_error)] : null,
    h("dt", {}, "Transcript"), h("dd", {}, `${view.transcript_length} message(s) at this call`),
  );
}

/** The transcript messages the model did not see verbatim, fetched on demand (up to the first 500). */
function droppedList(sessionId, indices) {
  const list = h("ol", { class: "transcript", id: "model-view-dropped" });
  const details = h("details", { class: "dropped" },
    h("summary", {}, `Dropped from the model's view: ${indices.length} transcript message(s)`), list);
  let loaded = false;
  details.addEventListener("toggle", async () => {
    if (!details.open || loaded) return;
    loaded = true;
    list.replaceChildren(h("li", { class: "muted" }, "Loading…"));
    try {
      const limit = Math.min(500, indices[indices.length - 1] + 1);
      const page = await api(`/sessions/${encodeURIComponent(sessionId)}/messages`, { query: { offset: 0, limit } });
      const wanted = new Set(indices);
      const items = page.messages.map((m, i) => [m, i]).filter(([, i]) => wanted.has(i)).map(([m, i]) => numbered(message(m), i));
      const more = indices.length - items.length;
      if (more > 0) items.push(h("li", { class: "muted" }, `and ${more} more (past the first 500 messages)`));
      list.replaceChildren(...items);
    } catch (err) {
      loaded = false;
      list.replaceChildren(h("li", { class: "bad" }, `Could not load them: ${err.message}`));
    }
  });
  return details;
}

/**
 * Show in `panel` what the model saw at `step` of run `runId`. A step with no model call (a 404)
 * is said in the panel; other errors are thrown for the page's banner. A later call wins over an
 * earlier one still loading.
 */
export async function showModelView(panel, { sessionId, runId, step, label }) {
  const request = String(Number(panel.dataset.request || 0) + 1);
  panel.dataset.request = request;
  show(panel, heading(label), h("p", { class: "muted", role: "status" }, "Loading…"));
  let view;
  try {
    view = await api(`/sessions/${encodeURIComponent(sessionId)}/model-view`, { query: { run_id: runId, step } });
  } catch (err) {
    if (panel.dataset.request !== request) return;
    if (err instanceof ApiError && err.status === 404) {
      show(panel, heading(label), h("p", { class: "bad", role: "status" },
        `Nothing to show at ${label}: ${err.message} (${err.code}). Only a step that made a model call has a view.`));
      return;
    }
    show(panel, heading(label));
    throw err;
  }
  if (panel.dataset.request !== request) return;
  if (!view.compacted) {
    show(panel, heading(label), h("p", { class: "as-is", role: "status" },
      `No compaction was in effect: the model saw the transcript as is (its ${view.transcript_length} message(s) at this call, after the system prompt).`));
    return;
  }
  const dropped = [];
  view.transcript_marks.forEach((m, i) => { if (m === "dropped") dropped.push(i); });
  const cleared = view.transcript_marks.filter((m) => m === "cleared").length;
  show(panel, 
    heading(label),
    h("p", { role: "status" }, `A compaction was in effect: the model was sent ${view.messages.length} message(s) after its system prompt `
      + `(${dropped.length} transcript message(s) dropped, ${cleared} tool result(s) cleared).`),
    compactionFacts(view.compaction, view),
    h("h4", {}, "Sent to the model"),
    h("ol", { class: "transcript", id: "model-view-sent" }, view.messages.map((m) => sentMessage(m, dropped.length))),
    dropped.length ? droppedList(sessionId, dropped) : null,
  );
}
