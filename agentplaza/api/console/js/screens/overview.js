//# allFunctionsCalledOnLoad
// Overview: the hub, the nodes, the agents by status, the work in flight, the spend, the plaza's state.

import {get} from "../api.js";
import {badge, card, fmt, h, money, pairs} from "../ui.js";

export async function render(view, ctx) {
  view.append(ctx.live(["*"], async () => {
    const [o, nodes, {flows}] = await Promise.all([get("/v1/overview"), get("/v1/nodes"), get("/v1/treasury/flows")]);
    const t = o.treasury;
    const statuses = Object.entries(o.agents.by_status || {});
    return [
      h("div", {class: "grid"},
        card("Plaza budget", h("p", {class: "stat", "data-testid": "budget"}, money(t.budget)),
          h("p", {}, "In circulation ", money(t.in_circulation))),
        card("The plaza", h("p", {class: "stat"}, badge(o.plaza.held ? "Held" : "Running", o.plaza.held ? "held" : "running")),
          h("p", {}, `${o.plaza.held ? "Held" : "Running"} since ${fmt.time(o.plaza.since)}`)),
        card("Agents", h("p", {class: "stat"}, fmt.n(o.agents.total)),
          statuses.length ? h("p", {}, statuses.map(([s, n]) => [badge(s), " ", fmt.n(n), " "])) : h("p", {class: "empty"}, "No agents yet.")),
        card("Work in flight", h("p", {class: "stat"}, fmt.n(o.tasks.open + o.tasks.claimed)),
          h("p", {}, `${fmt.n(o.tasks.open)} open, ${fmt.n(o.tasks.claimed)} in progress, ${fmt.n(o.tasks.done)} done`)),
        card("Approvals", h("p", {class: "stat"}, h("a", {href: "#/approvals"}, fmt.n(o.approvals.pending))),
          h("p", {}, "pending")),
        card("Spend", h("p", {class: "stat"}, money(flows.spent + flows.model_calls)),
          h("p", {}, `${fmt.n(o.models.model_calls)} model calls through ${fmt.n(o.models.providers)} providers; ` +
            `${fmt.n(t.pending_payments)} payments wait`))),
      h("div", {class: "grid"},
        card("Hub", pairs({Version: o.hub.version, Address: o.hub.address, Store: o.hub.store.backend,
          "Log position": fmt.n(o.hub.position), Started: fmt.time(o.hub.started_at)})),
        card("Nodes", nodes.nodes.length ? h("ul", {}, nodes.nodes.map((n) => h("li", {},
          h("a", {href: "#/nodes"}, n.name), " ", badge(n.online ? "online" : "offline", n.online ? "running" : "offline"),
          ` ${fmt.n(n.agents)} agents`))) : h("p", {class: "empty"}, "No nodes.")),
        card("Rules and vault", pairs({Laws: fmt.n(o.rules.laws), "Owner rules": fmt.n(o.rules.owner_rules),
          Refused: fmt.n(o.rules.refused), Vault: o.vault.state, "Vault entries": fmt.n(o.vault.entries)})),
        o.log.unreadable.length || Object.keys(o.log.read_models_failing).length
          ? card("Log health", h("p", {class: "error"}, `${o.log.unreadable.length} unreadable events; failing read models: ` +
            Object.keys(o.log.read_models_failing).join(", ")))
          : null),
    ];
  }, {label: "The plaza at a glance"}));
}
