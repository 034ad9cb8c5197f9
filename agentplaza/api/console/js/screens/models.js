//# allFunctionsCalledOnLoad
// Models: the providers as cards (Add key: the value goes to the vault and is never shown again; Test),
// the two-tier policy with prices, the effort pin, the sleep setting and the decision models.

import {get, patch, post, put} from "../api.js";
import {action, badge, card, field, fmt, form, h, pairs, select, table} from "../ui.js";

export async function render(view, ctx) {
  view.append(
    ctx.live(["models", "vault"], async () => {
      const {providers} = await get("/v1/models/providers");
      return h("div", {class: "grid", "aria-label": "Providers"}, providers.map(providerCard));
    }, {label: "Providers"}),
    ctx.live(["models"], async () => {
      const [{policy, efforts}, {models}, {decision_models: decision}] = await Promise.all(
        [get("/v1/models/policy"), get("/v1/models"), get("/v1/models/decision")]);
      const price = (m) => (m.price ? `${fmt.n(m.price.input)} / ${fmt.n(m.price.output)}` : "1 credit a call");
      const tier = (name) => table([{label: "Rank", value: (m) => String(policy[name].indexOf(m.model) + 1)},
        {label: "Model", value: (m) => m.model}, {label: "Provider", value: (m) => m.provider},
        {label: "Credits per million tokens (in / out)", value: price}],
      policy[name].map((id) => models.find((m) => m.model === id) || {model: id, provider: id.split("/")[0]}),
      {empty: "No model in this tier.", label: `The ${name} tier`});
      const effort = select("effort", [["", "Not pinned"], ...efforts.map((e) => [e, e])], policy.effort || "");
      const sleep = h("input", {name: "idle_sleep_min", type: "number", min: 0, value: policy.idle_sleep_min});
      const autoCp = select("vm_auto_checkpoints", [["on", "On"], ["off", "Off"]], policy.vm_auto_checkpoints === false ? "off" : "on");
      return [
        card("Model policy", pairs({"Default model": policy.default_model, "Orchestrator's model": policy.orchestrator_model,
          "Role models": Object.entries(policy.role_models).map(([r, m]) => `${r}: ${m}`).join(", ") || "—",
          "Training models allowed": policy.allow_training_models ? "yes" : "no"}),
        h("h3", {}, "Orchestrator tier"), tier("orchestrator"), h("h3", {}, "Worker tier"), tier("worker")),
        h("div", {class: "grid"},
          card("Effort", form({label: "Effort", submit: "Save effort", fields: [field("Effort pin", effort)],
            send: () => patch("/v1/models/policy", effort.value ? {effort: effort.value} : {clear_effort: true}).then(() => "Saved.")})),
          card("Sleep", form({label: "Sleep", submit: "Save sleep", fields: [field("Idle minutes before an agent sleeps", sleep,
            `0: agents never sleep on their own. Never sleep on their own: ${policy.sleep_never_roles.join(", ") || "no role"}.`)],
          send: () => patch("/v1/models/policy", {idle_sleep_min: Number(sleep.value)}).then(() => "Saved.")})),
          card("Decision models", h("ul", {}, decision.map((d) => h("li", {}, d.model, d.held ? [" ", badge("held")] : null)))),
          card("Checkpoints", form({label: "Checkpoints", submit: "Save checkpoints", fields: [field("Automatic checkpoints", autoCp,
            "On: a checkpoint of the agent's machine before each high-risk tool call (a shell command, a package install, an irreversible act), so a rollback undoes it.")],
          send: () => patch("/v1/models/policy", {vm_auto_checkpoints: autoCp.value === "on"}).then(() => "Saved.")})),
          card("Engines", h("p", {class: "later-note"},
            "This hub exposes no engines_enabled setting yet; the Engines card comes with coding engines."))),
      ];
    }, {label: "Policy"}));
}

function providerCard(p) {
  const key = h("input", {name: "value", type: "password", autocomplete: "off", required: true});
  return card(p.id, h("p", {}, badge(p.key_status), p.enabled ? "" : [" ", badge("disabled", "denied")]),
    pairs({Endpoint: p.endpoint, Models: p.models.join(", ")}),
    p.key && p.key.kind === "vault" ? form({label: `Add key for ${p.id}`, submit: "Save key",
      fields: [field("API key", key, "Stored in the vault; never shown again.")],
      send: async (_, el) => {
        const out = await put(`/v1/models/providers/${p.id}/key`, {value: key.value});
        el.reset();
        return out.key_status || "Key set";
      }}) : h("p", {}, `Key from ${p.key ? p.key.kind : "nowhere"}.`),
    action("Test", () => post(`/v1/models/providers/${p.id}/test`, {}).then((r) => (r.ok
      ? `${r.model} answered in ${fmt.n(Math.round(r.latency_ms))} ms.` : `${r.model}: ${r.message}`)), {label: `Test ${p.id}`}));
}
