//# allFunctionsCalledOnLoad
// Metrics, as far as this hub records it: the model calls, tokens and cost, split by agent, model and role
// (the usage the gateway meters). The scope tree, latency panels, machine resources and alerts come with
// the metrics area.

import {get} from "../api.js";
import {card, fmt, h, pairs, select, table} from "../ui.js";

const SPLITS = [["agent", "By agent"], ["model", "By model"], ["role", "By role"], ["provider", "By provider"], ["route", "By route"]];

export async function render(view, ctx) {
  const by = select("by", SPLITS, "agent");
  by.id = "usage-by";
  const section = ctx.live(["usage", "models"], async () => {
    const u = await get("/v1/usage/summary");
    const t = u.totals;
    const rows = u.by[by.value] || [];
    return [h("div", {class: "grid"}, card("Calls", h("p", {class: "stat"}, fmt.n(t.calls)), h("small", {}, `${fmt.n(t.errors)} errors`)),
      card("Tokens", h("p", {class: "stat"}, fmt.n(t.input_tokens + t.output_tokens)),
        h("small", {}, `${fmt.n(t.input_tokens)} in, ${fmt.n(t.output_tokens)} out; cache hits ${(t.cache_hit_rate * 100).toFixed(1)}%`)),
      card("Cost", h("p", {class: "stat"}, fmt.credits(Math.round(t.cost))), h("small", {}, `charged ${fmt.credits(t.charged)}`)),
      card("Latency", pairs({"Mean": t.mean_latency_ms === null ? "—" : `${fmt.n(Math.round(t.mean_latency_ms))} ms`,
        "First token": t.mean_ttft_ms === null ? "—" : `${fmt.n(Math.round(t.mean_ttft_ms))} ms`}))),
    table([{label: SPLITS.find(([k]) => k === by.value)[1].slice(3), value: (r) => String(r.key ?? r[by.value] ?? r.name ?? "—")},
      {label: "Calls", value: (r) => fmt.n(r.calls), sort: (r) => r.calls},
      {label: "Input tokens", value: (r) => fmt.n(r.input_tokens), sort: (r) => r.input_tokens},
      {label: "Output tokens", value: (r) => fmt.n(r.output_tokens), sort: (r) => r.output_tokens},
      {label: "Cost", value: (r) => fmt.credits(Math.round(r.cost)), sort: (r) => r.cost}], rows,
    {sortable: true, empty: "No model calls yet.", label: "Usage"})];
  }, {label: "Usage"});
  by.addEventListener("change", () => section.reload());
  view.append(h("div", {class: "row"}, h("label", {for: "usage-by"}, "Split"), by), section);
}
