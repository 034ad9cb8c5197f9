//# allFunctionsCalledOnLoad
// E2B API: the keys the E2B SDKs sign in with (a new key is shown once, with the three environment
// lines), the sandboxes with Pause, Resume and End, and the templates built through the API with their
// newest build's status, tags, size and failure, and Delete.

import {del, get, post} from "../api.js";
import {action, badge, card, field, form, h, table} from "../ui.js";

export async function render(view, ctx) {
  view.append(
    ctx.live(["plaza"], async () => {
      const {keys} = await get("/v1/e2b/keys");
      const label = h("input", {name: "label", required: true, maxlength: 80, autocomplete: "off"});
      const shown = h("pre", {class: "once", "aria-live": "polite"});
      return card("Keys", form({label: "New E2B key", submit: "Make key", fields: [field("Label", label)],
        send: async (_, el) => {
          const made = await post("/v1/e2b/keys", {label: label.value});
          shown.textContent = made.env.join("\n");
          el.reset();
          return "Shown once: copy the lines below.";
        }}), shown,
      table([{label: "Id", value: (k) => k.id}, {label: "Label", value: (k) => k.label}, {label: "Made", value: (k) => k.created},
        {label: "", value: (k) => action("Revoke", () => del(`/v1/e2b/keys/${encodeURIComponent(k.id)}`).then(() => "Revoked."),
          {label: `Revoke key ${k.label}`, kind: "danger", confirm: {title: `Revoke ${k.label}?`,
            message: "Every SDK using this key stops working.", reason: false, danger: true, yes: "Revoke"}})}],
      keys, {empty: "No keys yet.", label: "E2B keys"}));
    }, {label: "Keys"}),
    ctx.live(["plaza", "e2b"], async () => {
      const {sandboxes} = await get("/v1/e2b/sandboxes");
      const id = (s) => encodeURIComponent(s.id);
      return card("Sandboxes", table([{label: "Sandbox", value: (s) => s.id}, {label: "CID", value: (s) => String(s.cid)},
        {label: "State", value: (s) => badge(s.state, s.state === "running" ? "running" : "pending")},
        {label: "Template", value: (s) => s.template}, {label: "Ends", value: (s) => s.ends},
        {label: "", value: (s) => h("span", {},
          s.state === "running" ? action("Pause", () => post(`/v1/e2b/sandboxes/${id(s)}/pause`).then(() => "Paused."), {label: `Pause ${s.id}`})
            : action("Resume", () => post(`/v1/e2b/sandboxes/${id(s)}/resume`).then(() => "Resumed."), {label: `Resume ${s.id}`}),
          action("End", () => del(`/v1/e2b/sandboxes/${id(s)}`).then(() => "Ended."), {label: `End ${s.id}`, kind: "danger",
            confirm: {title: `End sandbox ${s.id}?`, message: "Its VM and files are removed.", reason: false, danger: true, yes: "End"}}))}],
      sandboxes, {empty: "No sandboxes. Create one with the E2B SDK (see docs/e2b.md).", label: "Sandboxes"}));
    }, {label: "Sandboxes"}),
    ctx.live(["plaza"], async () => {
      const {templates} = await get("/v1/e2b/templates");
      return card("Templates", table([{label: "Name", value: (t) => t.names.join(", ")}, {label: "Id", value: (t) => t.templateID},
        {label: "Newest build", value: (t) => badge(t.buildStatus, t.buildStatus === "ready" ? "approved" : t.buildStatus === "error" ? "denied" : "pending")},
        {label: "Tags", value: (t) => t.tags.join(", ") || "—"}, {label: "Size", value: (t) => `${t.diskSizeMB} MB`},
        {label: "Failure", value: (t) => t.reason || ""},
        {label: "", value: (t) => action("Delete", () => del(`/v1/e2b/templates/${encodeURIComponent(t.templateID)}`).then(() => "Deleted."),
          {label: `Delete template ${t.names.join(", ")}`, kind: "danger", confirm: {title: `Delete ${t.names.join(", ")}?`,
            message: "Its builds and their snapshots are removed.", reason: false, danger: true, yes: "Delete"}})}],
      templates, {empty: "No templates. Build one with the SDK's Template.build.", label: "Templates"}));
    }, {label: "Templates"}));
}
