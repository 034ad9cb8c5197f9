//# allFunctionsCalledOnLoad
// Vault (keys and secrets): sealed or unsealed, unseal, the entries by name and use (never a value), and
// the audit trail with verify.

import {get, post} from "../api.js";
import {action, badge, card, field, fmt, form, h, pairs, select, table} from "../ui.js";

export async function render(view, ctx) {
  view.append(
    ctx.live(["vault"], async () => {
      const v = await get("/v1/vault");
      const method = select("method", [["passphrase", "Passphrase"], ["recovery", "Recovery code"], ["keyfile", "Key file"]], "passphrase");
      const secret = h("input", {name: "secret", type: "password", autocomplete: "off"});
      return card("The vault", h("p", {class: "stat"}, badge(v.state)), pairs({Entries: fmt.n(v.entries),
        "Key slots": v.slots.map((s) => s.kind).join(", "), Nodes: v.nodes.join(", "),
        "Locked until": v.locked_until ? fmt.time(v.locked_until) : "—", Tampered: v.tampered ? String(v.tampered) : "no"}),
      v.sealed ? form({label: "Unseal", submit: "Unseal", fields: [field("With", method), field("Passphrase or code", secret)],
        send: async (_, el) => {
          const body = {method: method.value};
          if (method.value === "passphrase") body.passphrase = secret.value;
          if (method.value === "recovery") body.code = secret.value;
          await post("/v1/vault/unseal", body);
          el.reset();
          return "Unsealed.";
        }}) : action("Seal", (reason) => post("/v1/vault/seal", {reason}), {confirm: {title: "Seal the vault?",
        message: "Every value is unreadable until it is unsealed: model calls stop.", reason: "Reason", danger: true, yes: "Seal"}}));
    }, {label: "Vault state"}),
    ctx.live(["vault", "models"], async () => {
      const {secrets} = await get("/v1/vault/secrets");
      return card("Keys and secrets", table([{label: "Name", value: (s) => s.name, sort: (s) => s.name},
        {label: "Kind", value: (s) => s.kind}, {label: "Label", value: (s) => s.label || ""}, {label: "Used by", value: (s) => (s.bindings || []).join(", ") || "—"},
        {label: "Scope", value: (s) => s.scope || "—"}, {label: "Version", value: (s) => String(s.version)},
        {label: "Uses", value: (s) => fmt.n(s.uses), sort: (s) => s.uses},
        {label: "Changed", value: (s) => fmt.time(s.updated_at)}], secrets,
      {sortable: true, empty: "No secrets yet. A provider key added on Models lands here.", label: "Keys and secrets"}));
    }, {label: "Secrets"}),
    ctx.live(["vault"], async () => {
      const {lines} = await get("/v1/vault/audit");
      const verdict = h("span", {role: "status"});
      return card("Audit trail", h("div", {class: "actions"}, action("Verify", async () => {
        const r = await get("/v1/vault/audit/verify");
        return r.intact ? `Intact: ${fmt.n(r.lines)} lines.` : `Broken at line ${r.broken_at}: ${r.problem}`;
      }), verdict), table([{label: "#", value: (l) => String(l.n)}, {label: "When", value: (l) => fmt.time(l.at)},
        {label: "Action", value: (l) => l.action}, {label: "Who", value: (l) => l.actor},
        {label: "What", value: (l) => l.name || l.secret_id || l.slot_kind || ""}, {label: "Why", value: (l) => l.reason || ""}],
      [...lines].reverse(), {label: "Audit lines"}));
    }, {label: "Audit"}));
}
