//# allFunctionsCalledOnLoad
// Machines: every machine the plaza runs agents on (the hub's own is always n0), its state, load and runs,
// and Kill on a run (its VM stops now; the agent shows stopped).

import {get, post} from "../api.js";
import {action, badge, card, fmt, h, pairs, table} from "../ui.js";

const STATE_BADGE = {online: "running", draining: "pending", offline: "offline", revoked: "rejected"};

export async function render(view, ctx) {
  view.append(ctx.live(["node", "agent", "node_registry"], async () => {
    const {machines} = await get("/v1/machines");
    return machines.map((m) => {
      const f = m.facts || {};
      return card(`Machine ${m.id}${m.name !== m.id ? ` (${m.name})` : ""}`,
        h("p", {}, badge(m.state, STATE_BADGE[m.state] || m.state), m.hub ? " the hub's own machine" : null),
        pairs({CIDs: m.cids, Agents: fmt.n(m.load.agents), Running: fmt.n(m.load.running),
          "Memory used": m.load.memory_used_pct == null ? undefined : `${m.load.memory_used_pct}%`,
          Host: f.hostname, CPUs: f.cpus, OS: f.os, Backend: f.backend}),
        table([{label: "CID", value: (r) => r.cid}, {label: "Name", value: (r) => r.name || "—"},
          {label: "Role", value: (r) => r.role}, {label: "Run", value: (r) => r.run}, {label: "Status", value: (r) => r.status},
          {label: "", value: (r) => r.run === "running" ? action("Kill", () => post(`/v1/machines/${m.id}/runs/${r.cid}/kill`, {}),
            {label: `Kill the run of agent ${r.cid}`, kind: "danger",
             confirm: {title: `Kill agent ${r.cid}'s run?`, message: "Its VM stops now; starting it again is yours.", yes: "Kill", danger: true}}) : null}],
        m.runs, {empty: "No runs on this machine.", label: `Runs on ${m.id}`}));
    });
  }, {label: "Machines"}));
}
