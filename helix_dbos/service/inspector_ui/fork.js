// "Fork from here": time travel from one step of the timeline. A dialog asks for the edits (an
// edited input replacing the checkpoint's last user message or added after it, a JSON merge patch
// of the custom state), forks the session at that step's checkpoint (POST .../fork), runs the fork
// when asked (POST .../retry on it: the model's next call sees the edited input), and opens it.
import { api } from "./api.js";
import { h } from "./render.js";

export function openForkDialog({ sessionId, checkpointId, label, onForked, onError }) {
  document.getElementById("fork-dialog")?.remove();
  const message = h("textarea", { id: "fork-message", "aria-label": "Edited input", rows: 3, cols: 40, placeholder: "leave empty to keep the input" });
  const mode = h("select", { id: "fork-mode", "aria-label": "Edited input mode" },
    h("option", { value: "replace" }, "replaces the last user message"), h("option", { value: "append" }, "is added after the step"));
  const patch = h("textarea", { id: "fork-state-patch", "aria-label": "State merge patch (JSON)", rows: 3, cols: 40, placeholder: '{"key": "value"}  (null deletes a key)' });
  const run = h("input", { type: "checkbox", id: "fork-run", checked: true });
  const problem = h("p", { class: "bad", role: "alert", hidden: true });
  const submit = h("button", { type: "submit", class: "primary" }, "Fork");
  const dialog = h("dialog", { id: "fork-dialog", "aria-label": `Fork from ${label}` });
  const form = h("form", { onsubmit: async (event) => {
    event.preventDefault();
    const body = { checkpoint_id: checkpointId };
    if (message.value.trim()) Object.assign(body, { message: message.value.trim(), message_mode: mode.value });
    if (patch.value.trim()) {
      try {
        body.state_patch = JSON.parse(patch.value);
      } catch (err) {
        problem.textContent = `The state merge patch is not JSON: ${err.message}`;
        problem.hidden = false;
        return;
      }
    }
    submit.disabled = true;
    try {
      const fork = await api(`/sessions/${encodeURIComponent(sessionId)}/fork`, { method: "POST", body });
      if (run.checked) await api(`/sessions/${encodeURIComponent(fork.session_id)}/retry`, { method: "POST", body: {} });
      dialog.close();
      dialog.remove();
      onForked(fork);
    } catch (err) {
      dialog.close();
      dialog.remove();
      onError(err);
    }
  } },
    h("h2", {}, `Fork from ${label}`),
    h("p", { class: "muted" }, "A new session branched at this step's checkpoint; this one is not changed."),
    h("p", {}, h("label", { for: "fork-message" }, "Edited input"), h("br"), message, h("br"), mode),
    h("p", {}, h("label", { for: "fork-state-patch" }, "State merge patch (JSON)"), h("br"), patch),
    h("p", {}, run, h("label", { for: "fork-run" }, " Run the fork now")),
    problem,
    h("p", { class: "row" }, submit, h("button", { type: "button", onclick: () => { dialog.close(); dialog.remove(); } }, "Cancel")),
  );
  dialog.append(form);
  document.body.append(dialog);
  dialog.showModal();
  message.focus();
}
