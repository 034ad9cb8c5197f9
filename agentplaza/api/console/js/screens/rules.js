//# allFunctionsCalledOnLoad
// Rules: the built-in laws and the owner's rules with how often each refused a call; show a law's text;
// write a rule, Check it (which recent calls it would have refused; a compile error names its line),
// and save it; disable or enable with a reason; the latest infractions.

import {get, post} from "../api.js";
import {action, badge, card, errorText, field, fmt, h, pairs, table} from "../ui.js";

const EXAMPLE = 'law no-git-push "No pushing" {\n  statement "Agents do not push to the plaza\'s git host."\n  forbid plaza_git\n}\n';

export async function render(view, ctx) {
  const shown = h("div");
  const source = h("textarea", {name: "source", rows: 8, spellcheck: "false"}, EXAMPLE);
  const title = h("input", {name: "title", required: true, value: "No pushing"});
  const out = h("div", {role: "status", "aria-live": "polite"});
  const send = async (run) => {
    out.replaceChildren("…");
    try {
      out.replaceChildren(await run());
    } catch (err) {
      const where = err.detail && err.detail.line ? h("strong", {}, `Line ${err.detail.line}, column ${err.detail.column}: `) : null;
      out.replaceChildren(h("p", {class: "error", role: "alert"}, where, errorText(err)));
    }
  };
  const check = h("button", {type: "button", onclick: () => send(async () => {
    const c = await post("/v1/rules/check", {op: "add", title: title.value, source: source.value});
    return h("div", {}, h("p", {}, `Check passed. Replayed ${fmt.n(c.replayed)} recent calls: ${fmt.n(c.newly_refused)} would now be refused, ` +
      `${fmt.n(c.newly_allowed)} newly allowed.`), c.warnings.map((w) => h("p", {class: "error"}, String(w.message || w))),
    table([{label: "Call", value: (x) => x.tool || x.action || JSON.stringify(x)}, {label: "Agent", value: (x) => x.agent ?? "—"},
      {label: "Now", value: (x) => x.now || x.decision || "—"}], c.changes, {empty: "No recent call would change.", label: "Calls it would change"}));
  })}, "Check");
  const save = h("button", {type: "button", class: "primary", onclick: () => send(async () => {
    const r = await post("/v1/rules", {title: title.value, source: source.value});
    return h("p", {}, `Saved rule ${r.id}.`);
  })}, "Save");
  view.append(
    card("Write a rule", h("div", {class: "form"}, field("Title", title), field("Rule (JHRL)", source),
      h("div", {class: "actions"}, check, save)), out),
    shown,
    ctx.live(["rules"], async () => {
      const {laws} = await get("/v1/rules");
      const columns = [
        {label: "Law", value: (l) => h("button", {type: "button", class: "link", onclick: () => showLaw(shown, l.id)}, l.id), sort: (l) => l.id},
        {label: "Title", value: (l) => l.title, sort: (l) => l.title},
        {label: "Effect", value: (l) => l.effect},
        {label: "Refused", value: (l) => fmt.n(l.refused), sort: (l) => l.refused},
        {label: "State", value: (l) => [badge(l.enabled ? "enabled" : "disabled", l.enabled ? "approved" : "denied"),
          l.reason ? h("small", {}, " ", l.reason) : null]},
        {label: "", nosort: true, value: (l) => l.enabled
          ? action("Disable", (reason) => post(`/v1/rules/${l.id}/disable`, {reason}), {label: `Disable ${l.id}`,
            confirm: {title: `Disable ${l.id}?`, message: l.title, reason: "Reason", required: true, danger: true, yes: "Disable"}})
          : action("Enable", (reason) => post(`/v1/rules/${l.id}/enable`, {reason}), {label: `Enable ${l.id}`,
            confirm: {title: `Enable ${l.id}?`, reason: "Reason", yes: "Enable"}})},
      ];
      return [
        card("Owner rules", table(columns, laws.filter((l) => l.origin !== "builtin"),
          {sortable: true, label: "Owner rules", empty: "No owner rules yet. Write one above."})),
        card("Built-in laws", table(columns, laws.filter((l) => l.origin === "builtin"), {sortable: true, label: "Built-in laws"})),
      ];
    }, {label: "Laws"}),
    ctx.live(["rules", "conduct"], async () => {
      const {infractions} = await get("/v1/rules/infractions");
      return card("Infractions", table([{label: "When", value: (i) => fmt.time(i.at)}, {label: "Law", value: (i) => i.law},
        {label: "Agent", value: (i) => String(i.agent ?? i.cid ?? "—")}, {label: "Tool", value: (i) => i.tool || "—"}],
      infractions, {empty: "No infractions.", label: "Infractions"}));
    }, {label: "Infractions"}));
}

async function showLaw(host, id) {
  const l = await get(`/v1/rules/${id}`);
  host.replaceChildren(card(`${l.id}: ${l.title}`, pairs({Statement: l.statement, Severity: l.severity, Tier: l.tier,
    Enforcement: l.enforcement, Actions: (l.actions || []).join(", "), Reason: l.reason}), h("pre", {}, l.text)));
  host.scrollIntoView({block: "nearest"});
}
