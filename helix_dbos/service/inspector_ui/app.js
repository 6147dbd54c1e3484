// The inspector: a sessions list and a session page, driven by the hash (#/ and #/s/<id>, with
// ?run=<run_id>&step=<n> when the page shows "What the model saw" at that step).
import { api, ApiError, setToken, token } from "./api.js";
import { badge, cost, duration, h, json, message, numbered, time } from "./render.js";
import { openForkDialog } from "./fork.js";
import { showModelView } from "./model_view.js";
import { follow } from "./sse.js";

const $ = (id) => document.getElementById(id);
const view = $("view");
const PAGE = 20;
const STATUSES = ["", "active", "completed", "failed", "interrupted", "paused"];
let current = null; // the open session page: { id, stream, timer }
let routed = 0; // counts route() calls: a page whose data arrives after a newer route() is dropped

// For the browser tests and for the curious: the live stream's handle of the open session page.
window.helixInspector = {
  stream: () => (current ? current.stream : null),
  refresh: () => current && current.parts && scheduleRefresh(current, current.parts),
  refreshes: () => (current ? current.refreshes : 0),
  // No refresh waiting on its timer or its requests: what the page shows will not change on its own.
  settled: () => !current || (current.timer === null && current.loading === 0),
};

function notice(text, kind = "error") {
  const box = $("notice");
  if (!text) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.className = kind === "info" ? "info" : "";
  box.textContent = text;
  box.hidden = false;
}

function showError(err) {
  if (err instanceof ApiError && err.status === 401) {
    logout("The service refused this token (401). Enter a valid one.");
    return;
  }
  const code = err instanceof ApiError ? ` (${err.code})` : "";
  notice(`${err.message}${code}`);
}

function closeSession() {
  if (current) {
    if (current.stream) current.stream.stop();
    clearTimeout(current.timer);
  }
  current = null;
}

function logout(reason, kind = "error") {
  closeSession();
  routed += 1;
  setToken(null);
  view.replaceChildren();
  $("logout").hidden = true;
  $("login").hidden = false;
  notice(reason || "", kind);
  $("token").value = "";
  $("token").focus();
}

async function login(event) {
  event.preventDefault();
  const value = $("token").value.trim();
  if (!value) return;
  setToken(value);
  try {
    await api("/sessions", { query: { limit: 1 } });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      logout("The service refused this token (401). Nothing is shown without a valid one.");
    } else {
      setToken(null);
      showError(err);
    }
    return;
  }
  $("token").value = "";
  notice("");
  route();
}

// Buttons answer once: disabled while their request is in flight (the server answers exactly once anyway).
async function act(button, fn) {
  if (button.disabled) return;
  button.disabled = true;
  notice("");
  try {
    await fn();
  } catch (err) {
    showError(err);
  } finally {
    button.disabled = false;
  }
}

// ---- sessions list -------------------------------------------------------------------------------

async function listPage(params, routeId) {
  const status = params.get("status") || "";
  const agent = params.get("agent") || "";
  const offset = Number(params.get("offset") || 0);
  const [page, served] = await Promise.all([
    api("/sessions", { query: { status, agent, offset, limit: PAGE } }),
    // Without the list of agents (an older service) the form takes a typed name.
    api("/agents").then((r) => r.agents, (err) => (err instanceof ApiError && err.status === 401 ? Promise.reject(err) : null)),
  ]);
  if (routeId !== routed) return; // a newer page shows by now
  const names = served ? served.map((a) => a.name) : [];

  const filters = h(
    "form",
    { class: "row", "aria-label": "Filter sessions", onsubmit: (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      if (e.target.status.value) q.set("status", e.target.status.value);
      if (e.target.agent.value.trim()) q.set("agent", e.target.agent.value.trim());
      location.hash = `#/?${q}`;
    } },
    h("label", { for: "f-status" }, "Status filter"),
    h("select", { id: "f-status", name: "status" }, STATUSES.map((s) => h("option", { value: s, selected: s === status }, s || "any"))),
    h("label", { for: "f-agent" }, "Agent filter"),
    h("input", { id: "f-agent", name: "agent", value: agent, placeholder: "any", list: "served-agents" }),
    h("datalist", { id: "served-agents" }, names.map((n) => h("option", { value: n }))),
    h("button", { type: "submit" }, "Filter"),
  );

  const rows = page.items.map((s) =>
    h("tr", {},
      h("td", {}, h("a", { href: `#/s/${encodeURIComponent(s.session_id)}` }, s.session_id)),
      h("td", {}, s.agent),
      h("td", {}, badge(s.status)),
      h("td", { class: "num" }, s.turn),
      h("td", {}, time(s.updated_at)),
      h("td", { class: "num" }, cost(s.cost_usd)),
      h("td", { class: "num" }, s.total_tokens),
    ));
  const table = h("div", { class: "scroll" }, h("table", { "aria-label": "Sessions" },
    h("thead", {}, h("tr", {}, ["Session", "Agent", "Status", "Turns", "Updated", "Cost", "Tokens"].map((t, i) =>
      h("th", { scope: "col", class: i === 3 || i >= 5 ? "num" : "" }, t)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No sessions."))),
  ));
  const go = (delta) => {
    const q = new URLSearchParams(params);
    q.set("offset", String(Math.max(0, offset + delta)));
    location.hash = `#/?${q}`;
  };
  const pager = h("div", { class: "row pager" },
    h("button", { type: "button", disabled: offset === 0, onclick: () => go(-PAGE) }, "Previous"),
    h("span", { class: "muted" }, `${page.items.length ? offset + 1 : 0}–${offset + page.items.length}`),
    h("button", { type: "button", disabled: !page.has_more, onclick: () => go(PAGE) }, "Next"),
  );

  const start = h("form", { class: "card", "aria-labelledby": "start-title", onsubmit: (e) => {
    e.preventDefault();
    const form = e.target;
    act(form.querySelector("button"), async () => {
      const run = await api("/runs", { method: "POST", body: { agent: form.agent.value.trim(), input: form.input.value } });
      location.hash = `#/s/${encodeURIComponent(run.session_id)}`;
    });
  } },
    h("h2", { id: "start-title" }, "Start a run"),
    h("div", { class: "row" },
      h("label", { for: "run-agent" }, "Agent"),
      agentField(served, agent),
      h("label", { for: "run-input" }, "Message"),
      h("input", { id: "run-input", name: "input", required: true, size: 40 }),
      h("button", { type: "submit", class: "primary" }, "Start"),
    ),
  );

  view.replaceChildren(h("h1", {}, "Sessions"), start, h("div", { class: "card" }, filters, table, pager));
}

// The served agents to choose from: the filtered one or the only one is chosen already; with
// several, an empty first choice makes the operator pick (the field is required).
function agentField(served, filtered) {
  if (!served) return h("input", { id: "run-agent", name: "agent", required: true, value: filtered });
  const chosen = served.length === 1 ? served[0].name : served.some((a) => a.name === filtered) ? filtered : "";
  return h("select", { id: "run-agent", name: "agent", required: true },
    served.length === 1 ? null : h("option", { value: "", selected: !chosen }, served.length ? "choose an agent" : "no agents served"),
    served.map((a) => h("option", { value: a.name, title: a.description || null, selected: a.name === chosen }, a.name)));
}

// ---- session page --------------------------------------------------------------------------------

function section(id, title, ...body) {
  return h("section", { class: "card", id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title), ...body);
}

// #/s/<id>?run=<run_id>&step=<n> opens the session with "What the model saw" at that step shown.
async function sessionPage(id, params) {
  const page = { id, stream: null, timer: null, loading: 0, patches: [], text: "", refreshes: 0, timeline: null };
  current = page;
  const live = h("div", { id: "live-text", "aria-live": "polite" });
  const liveEvents = h("ul", { class: "live-events", id: "live-events" });
  const streamState = h("span", { id: "stream-state", class: "muted" }, "connecting…");
  const parts = {
    head: h("div", { id: "summary" }),
    controls: h("div", { id: "controls" }),
    pending: h("div", { id: "pending-list" }),
    answers: h("ul", { id: "answers", class: "live-events", "aria-label": "Your answers" }),
    transcript: h("ol", { class: "transcript", id: "transcript" }),
    state: h("div", { id: "state" }),
    timeline: h("div", { id: "timeline-body", class: "scroll" }),
    modelView: h("div", { id: "model-view-body" }, h("p", { class: "muted" },
      "Choose \u201cWhat the model saw\u201d on a timeline step: the messages its model call was sent, "
      + "which differ from the transcript once a compaction dropped, summarised or cleared some.")),
  };
  page.parts = parts;
  view.replaceChildren(
    h("p", {}, h("a", { href: "#/" }, "← Sessions")),
    h("h1", {}, "Session ", h("code", {}, id)),
    parts.head,
    section("control", "Controls", parts.controls),
    h("div", { class: "grid" },
      h("div", {},
        section("pending", "Waiting for you", parts.pending, parts.answers),
        section("live", "Live", h("p", {}, "Stream: ", streamState), live, liveEvents),
        section("messages", "Transcript", parts.transcript)),
      h("div", {},
        section("model-view", "What the model saw", parts.modelView),
        section("custom-state", "Custom state", parts.state))),
    section("timeline", "Timeline", parts.timeline),
  );

  const snap = await api(`/sessions/${encodeURIComponent(id)}`);
  if (current !== page) return;
  renderSession(page, parts, snap);
  await refresh(page, parts, snap);
  if (current !== page) return;
  const linkedRun = params.get("run");
  const linkedStep = Number(params.get("step"));
  if (linkedRun && Number.isInteger(linkedStep)) {
    const run = page.timeline && page.timeline.runs.find((r) => r.run_id === linkedRun);
    openModelView(page, parts, linkedRun, linkedStep, run ? `turn ${run.turn} step ${linkedStep}` : `step ${linkedStep} of run ${linkedRun}`, false);
  }

  const start = snap.current_run ? snap.current_run.stream_start_sequence : 0;
  const onEvent = (event) => {
    if (current !== page) return;
    if (event.event === "chunk") onChunk(page, JSON.parse(event.data), live, liveEvents);
    else if (event.event === "fail") notice(`The stream failed: ${JSON.parse(event.data).error}`);
    if (event.event !== "chunk" || /^(step_committed|run_paused|run_resumed|run_interrupted|tool_approval_request|tool_end|output|error)$/.test(JSON.parse(event.data).type || "")) {
      scheduleRefresh(page, parts);
    }
  };
  const onState = (state) => {
    streamState.textContent = { open: "live", retrying: "reconnecting…", ended: "ended (the run finished)", stopped: "closed", refused: "refused" }[state] || state;
  };
  page.startStream = () => {
    if (page.stream && page.stream.state !== "ended" && page.stream.state !== "refused") return;
    const after = page.stream ? page.stream.lastEventId : start;
    page.stream = follow(`/v1/sessions/${encodeURIComponent(id)}/stream`, after, onEvent, onState);
  };
  page.startStream();
}

function onChunk(page, chunk, live, liveEvents) {
  const add = (text) => {
    liveEvents.append(h("li", {}, text));
    while (liveEvents.children.length > 30) liveEvents.firstChild.remove();
  };
  const afterText = page.lastWasText;
  page.lastWasText = chunk.type === "text_delta" || (afterText && chunk.type === "thinking");
  switch (chunk.type) {
    case "text_delta":
      // A new paragraph when text follows anything else (tools, a committed step).
      if (page.text && !afterText) page.text += "\n\n";
      page.text += chunk.content;
      live.textContent = page.text;
      break;
    case "thinking":
      add("thinking…");
      break;
    case "tool_start":
      add(`tool ${chunk.tool_name} started`);
      break;
    case "tool_end":
      add(`tool ${chunk.tool_name} ${chunk.error ? "failed" : "finished"}`);
      break;
    case "tool_approval_request":
      add(`approval requested for ${chunk.tool_name}`);
      break;
    case "state_patch":
      page.patches.push(chunk.patches);
      break;
    case "step_committed":
      add(`step ${chunk.step ?? ""} committed`);
      break;
    case "run_paused":
    case "run_resumed":
    case "run_interrupted":
      add(chunk.type.replace("_", " "));
      break;
    case "error":
      add(`error: ${chunk.error}`);
      break;
    case "output":
      add("structured output");
      break;
    default:
      break;
  }
}

function scheduleRefresh(page, parts) {
  clearTimeout(page.timer);
  page.timer = setTimeout(async () => {
    page.timer = null;
    if (current !== page) return;
    page.loading += 1;
    try {
      const snap = await api(`/sessions/${encodeURIComponent(page.id)}`);
      if (current !== page) return;
      renderSession(page, parts, snap);
      await refresh(page, parts, snap);
      page.refreshes += 1;
    } catch (err) {
      showError(err);
    } finally {
      page.loading -= 1;
    }
  }, 150);
}

async function refresh(page, parts, snap) {
  const id = encodeURIComponent(page.id);
  const [messages, state, timeline] = await Promise.all([
    api(`/sessions/${id}/messages`, { query: { limit: 500, offset: Math.max(0, snap.message_count - 500) } }),
    api(`/sessions/${id}/state`),
    api(`/sessions/${id}/timeline`),
  ]);
  if (current !== page) return;
  parts.transcript.replaceChildren(...messages.messages.map((m, i) => numbered(message(m), messages.offset + i)));
  const patches = page.patches.slice(-5).map((p) => h("pre", { class: "patch" }, json(p)));
  parts.state.replaceChildren(h("pre", {}, json(state.state)),
    patches.length ? h("div", {}, h("h3", {}, "Latest patches"), ...patches) : "");
  renderTimeline(page, parts, timeline);
}

function renderSession(page, parts, snap) {
  const u = snap.usage;
  parts.head.replaceChildren(h("dl", { class: "kv card", "aria-label": "Summary" },
    h("dt", {}, "Status"), h("dd", { id: "session-status" }, badge(snap.status)),
    h("dt", {}, "Agent"), h("dd", {}, snap.agent),
    h("dt", {}, "Turn"), h("dd", {}, `${snap.turn} · ${snap.step_count} step(s) · ${snap.message_count} message(s)`),
    h("dt", {}, "Usage"), h("dd", {}, `${u.total_tokens} tokens · ${cost(u.cost_usd)} · ${u.llm_calls} LLM call(s) · ${u.tool_calls} tool call(s)`),
    snap.error ? [h("dt", {}, "Error"), h("dd", {}, snap.error)] : null,
    h("dt", {}, "Updated"), h("dd", {}, time(snap.updated_at)),
  ));
  renderPending(page, parts, snap);
  renderControls(page, parts, snap);
}

function renderPending(page, parts, snap) {
  const calls = snap.pending_tool_calls;
  // Cards of calls still waiting are kept as they are, never rebuilt: a refresh must not wipe
  // what the operator is typing (a reason, a JSON result) or move their focus.
  const waiting = new Set(calls.map((c) => c.tool_call_id));
  const kept = new Map();
  for (const card of [...parts.pending.querySelectorAll("article.pending")]) {
    if (waiting.has(card.dataset.toolCallId)) kept.set(card.dataset.toolCallId, card);
    else card.remove();
  }
  const empty = parts.pending.querySelector(".empty");
  if (!calls.length) {
    if (!empty) parts.pending.append(h("p", { class: "muted empty" }, "Nothing is waiting."));
    return;
  }
  if (empty) empty.remove();
  const submit = (body) => api(`/sessions/${encodeURIComponent(page.id)}/tool-results`, { method: "POST", body });
  const answered = (card, text) => {
    card.querySelectorAll("button, input, textarea").forEach((el) => { el.disabled = true; });
    card.append(h("p", { class: "muted", role: "status" }, text));
    // Kept outside the cards, which go when the server no longer lists the call.
    parts.answers.append(h("li", {}, text));
    page.startStream();
    scheduleRefresh(page, parts);
  };
  parts.pending.append(...calls.filter((call) => !kept.has(call.tool_call_id)).map((call) => {
    const card = h("article", { class: "card pending", "data-tool-call-id": call.tool_call_id, "aria-label": `${call.tool_name} (${call.kind})` });
    card.append(
      h("h3", {}, h("code", {}, call.tool_name), " ", call.kind === "rerun"
        // Its worker died mid-call and the tool is not retry-safe: approve runs it once more.
        ? h("span", { class: "badge outcome-unknown" }, "outcome unknown: run again?")
        : h("span", { class: "muted" }, call.kind === "client" ? "needs a result" : "needs approval")),
      h("pre", {}, json(call.arguments)),
      h("div", { class: "digest" }, `digest ${call.arguments_digest}`),
    );
    // A sub-agent's or companion's call: answered here all the same (the server routes it to its owner).
    if (call.session_id && call.session_id !== page.id) {
      card.append(h("div", { class: "muted owner", "data-owner": call.session_id }, `asked by ${call.session_id}`));
    }
    if (call.kind === "client") {
      const area = h("textarea", { "aria-label": `JSON result for ${call.tool_name}` }, "{}");
      const send = h("button", { type: "button", class: "primary", onclick: () => act(send, async () => {
        let result;
        try {
          result = JSON.parse(area.value);
        } catch (err) {
          throw new ApiError(0, "invalid_json", `The result is not JSON: ${err.message}`);
        }
        await submit({ kind: "client-tool-result", tool_call_id: call.tool_call_id, result });
        answered(card, `Result sent for ${call.tool_name}.`);
      }) }, "Send result");
      card.append(area, h("div", { class: "row" }, send));
    } else {
      const reason = h("input", { "aria-label": `Reason for ${call.tool_name}`, placeholder: "reason (optional)", size: 28 });
      const decide = (approved, button) => act(button, async () => {
        const body = { kind: "approval-response", tool_call_id: call.tool_call_id, approved, arguments_digest: call.arguments_digest };
        if (reason.value.trim()) body.reason = reason.value.trim();
        await submit(body);
        answered(card, `${approved ? "Approved" : "Denied"} ${call.tool_name}${body.reason ? `: ${body.reason}` : ""}.`);
      });
      const approve = h("button", { type: "button", class: "primary", onclick: () => decide(true, approve) }, "Approve");
      const deny = h("button", { type: "button", class: "danger", onclick: () => decide(false, deny) }, "Deny");
      card.append(h("div", { class: "row" }, approve, deny, reason));
    }
    return card;
  }));
}

function renderControls(page, parts, snap) {
  const id = encodeURIComponent(page.id);
  const running = snap.status === "active";
  // Each control is enabled only when the session's state lets it apply (what the server checks
  // too); a disabled one says why in its tooltip. `unless` is that reason, or null when it applies.
  const control = (label, ask, fn, cls, unless = null) => {
    const button = h("button", { type: "button", class: cls || "", disabled: Boolean(unless), title: unless, onclick: () => {
      if (!window.confirm(ask)) return;
      act(button, async () => {
        try {
          await fn();
          notice(`${label}: accepted.`, "info");
        } finally {
          // Refused or not, the session may have moved on (another tab, the CLI): catch up with it.
          page.startStream();
          scheduleRefresh(page, parts);
        }
      });
    } }, label);
    return button;
  };
  const noRun = running && snap.current_run ? null : `no run is in flight (the session is ${snap.status})`;
  const interruptWhy = noRun || (snap.interrupt_requested ? "an interrupt is already requested" : null);
  const resumeWhy = snap.can_resume.can_resume ? null : `not resumable: ${snap.can_resume.reason || snap.status}`;
  const msg = h("input", { id: "control-message", "aria-label": "Message for resume, retry or the next turn", placeholder: "message (optional)", size: 30 });
  const text = () => msg.value.trim() || undefined;
  const checkpoint = h("select", { id: "checkpoint", "aria-label": "Checkpoint for retry or fork" }, h("option", { value: "" }, "latest checkpoint"));
  for (const [cid, label] of page.checkpoints || []) checkpoint.append(h("option", { value: cid }, label));
  const buttons = [
    control("Interrupt", "Interrupt the run at its next step? It stays resumable.", () => api(`/sessions/${id}/interrupt`, { method: "POST", body: {} }), "", interruptWhy),
    control("Resume", "Resume this session in a new run?", () => api(`/sessions/${id}/resume`, { method: "POST", body: text() ? { message: text() } : {} }), "", resumeWhy),
    control("Abort", "Abort the run? The session ends failed and cannot be resumed.", () => api(`/sessions/${id}/abort`, { method: "POST", body: {} }), "danger", noRun),
    control("Retry", "Retry from the chosen checkpoint, discarding what followed it?", () =>
      api(`/sessions/${id}/retry`, { method: "POST", body: { ...(checkpoint.value ? { checkpoint_id: checkpoint.value } : {}), ...(text() ? { message: text() } : {}) } }),
    "", running ? "a run is in flight: interrupt or abort it first" : null),
    control("Fork", "Fork a new session from the chosen checkpoint?", async () => {
      const fork = await api(`/sessions/${id}/fork`, { method: "POST", body: checkpoint.value ? { checkpoint_id: checkpoint.value } : {} });
      location.hash = `#/s/${encodeURIComponent(fork.session_id)}`;
    }),
    control("Send as next turn", "Start the next turn of this session with the message?", () =>
      api("/runs", { method: "POST", body: { agent: snap.agent, session_id: page.id, input: msg.value } })),
  ];
  const keepFocus = document.activeElement && parts.controls.contains(document.activeElement) ? document.activeElement.id : null;
  const oldMessage = parts.controls.querySelector("#control-message");
  if (oldMessage) msg.value = oldMessage.value;
  parts.controls.replaceChildren(
    h("div", { class: "row" }, msg, checkpoint),
    h("div", { class: "row", style: null }, buttons),
    h("p", { class: "muted" }, running ? "A run is in flight or waiting for you." : "No run is in flight."),
  );
  if (keepFocus) { const el = document.getElementById(keepFocus); if (el) el.focus(); }
}

// A checkpoint records the run's status when it was written: `running` on every step but the one the
// run ended (or stopped to wait) at. So a step whose checkpoint says `running` was committed and the
// run went on; the last step shows how the run ended there.
function stepStatus(status) {
  return status === "running" ? "committed" : status;
}

// The panel beside the transcript; the URL says which step it shows (a link to share, kept on reload)
// without a hashchange, which would rebuild the page.
function openModelView(page, parts, runId, step, label, moveFocus = true) {
  const query = new URLSearchParams({ run: runId, step: String(step) });
  history.replaceState(null, "", `#/s/${encodeURIComponent(page.id)}?${query}`);
  const shown = showModelView(parts.modelView, { sessionId: page.id, runId, step, label });
  if (moveFocus) {
    const title = document.getElementById("model-view-title");
    if (title) { title.scrollIntoView({ block: "start" }); title.focus({ preventScroll: true }); }
  }
  shown.catch((err) => { if (current === page) showError(err); });
}

function renderTimeline(page, parts, timeline) {
  page.timeline = timeline;
  const rows = [];
  const checkpoints = [];
  for (const run of timeline.runs) {
    rows.push(h("tr", { class: "run-row" }, h("th", { scope: "row", colspan: 2 }, `turn ${run.turn} · ${run.mode}`),
      h("td", {}, badge(run.status), run.waiting_for_rate_limit ? h("span", { class: "rate-wait" }, ` waiting for rate limit ${run.waiting_for_rate_limit}`) : null), h("td", { class: "num" }, duration(run.duration_ms)),
      h("td", { class: "num" }, run.totals.input_tokens + run.totals.output_tokens), h("td", { class: "num" }, cost(run.totals.cost_usd)), h("td"), h("td")));
    for (const step of run.steps) {
      const label = `turn ${run.turn} step ${step.step}`;
      if (step.checkpoint_id) checkpoints.push([step.checkpoint_id, label]);
      // Time travel: a fork at this step's checkpoint, with an edited input or state (fork.js).
      const forkHere = step.checkpoint_id ? h("button", { type: "button", class: "small", "aria-label": `Fork from ${label}`, onclick: () =>
        openForkDialog({ sessionId: page.id, checkpointId: step.checkpoint_id, label,
          onForked: (fork) => { notice(`Forked ${fork.session_id} from ${label}.`, "info"); location.hash = `#/s/${encodeURIComponent(fork.session_id)}`; },
          onError: showError }) }, "Fork from here") : null;
      // Step 0 is the run's start: no model call, nothing the model saw.
      const sawHere = step.step >= 1 ? h("button", { type: "button", class: "small", "aria-label": `What the model saw at ${label}`,
        onclick: () => openModelView(page, parts, run.run_id, step.step, label) }, "What the model saw") : null;
      rows.push(h("tr", { class: "step-row" },
        h("td", { class: "nowrap" }, `step ${step.step}`),
        h("td", {}, [step.model || "", ...step.tool_calls.map((t) => ` ${t.name}${t.success ? "" : " ✗"}`)].join("")),
        h("td", {}, stepStatus(step.status)),
        h("td", { class: "num" }, duration(step.duration_ms)),
        h("td", { class: "num" }, step.input_tokens + step.output_tokens),
        h("td", { class: "num" }, cost(step.cost_usd)),
        h("td", {}, forkHere),
        h("td", {}, sawHere)));
    }
  }
  page.checkpoints = checkpoints;
  const select = document.getElementById("checkpoint");
  if (select && select.options.length !== checkpoints.length + 1) {
    const chosen = select.value;
    select.replaceChildren(h("option", { value: "" }, "latest checkpoint"), ...checkpoints.map(([cid, label]) => h("option", { value: cid, selected: cid === chosen }, label)));
  }
  const t = timeline.totals;
  parts.timeline.replaceChildren(h("table", { "aria-label": "Step timeline" },
    h("thead", {}, h("tr", {}, ["Step", "Model / tools", "Status", "Took", "Tokens", "Cost", "Time travel", "Model view"].map((x, i) => h("th", { scope: "col", class: i >= 3 && i <= 5 ? "num" : "" }, x)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No steps yet."))),
    h("tfoot", {}, h("tr", {}, h("th", { scope: "row", colspan: 4 }, "Total"), h("td", { class: "num" }, t.input_tokens + t.output_tokens), h("td", { class: "num" }, cost(t.cost_usd)), h("td"), h("td"))),
  ));
}

// ---- routing -------------------------------------------------------------------------------------

async function route() {
  closeSession();
  const mine = ++routed;
  if (!token()) {
    logout("");
    return;
  }
  $("login").hidden = true;
  $("logout").hidden = false;
  const hash = location.hash || "#/";
  const onSession = hash.startsWith("#/s/");
  try {
    if (onSession) {
      const [path, query] = hash.slice(4).split("?");
      await sessionPage(decodeURIComponent(path), new URLSearchParams(query || ""));
    }
    else await listPage(new URLSearchParams(hash.split("?")[1] || ""), mine);
  } catch (err) {
    if (mine !== routed) return; // a newer page shows by now
    closeSession();
    showError(err);
    if (!token()) return; // refused token: the login form shows
    // The banner says what failed; the page offers the way on rather than staying blank.
    view.replaceChildren(h("p", { class: "row" },
      h("button", { type: "button", onclick: () => { notice(""); route(); } }, "Try again"),
      onSession ? h("a", { href: "#/" }, "← Sessions") : null));
  }
}

$("login-form").addEventListener("submit", login);
$("logout").addEventListener("click", () => logout("Logged out.", "info"));
window.addEventListener("hashchange", () => { notice(""); route(); });
route();
