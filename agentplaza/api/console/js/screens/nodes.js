// Nodes: the machines that run agents, their facts, the isolation level the probe found (hardware KVM or
// emulation), and the warm templates.

import {ApiError, del, get, post} from "../api.js";
import {action, badge, card, fmt, h, pairs, table} from "../ui.js";

export async function render(view, ctx) {
  view.append(ctx.live(["node", "agent", "node_registry"], async () => {
    const {nodes} = await get("/v1/nodes");
    return nodes.map((n) => {
      const f = n.facts || {};
      return card(`Node ${n.name}`, h("p", {}, badge(n.online ? "online" : "offline", n.online ? "running" : "offline"), " ",
        f.isolation ? badge(f.kvm ? `hardware KVM (${f.isolation})` : `emulation (${f.isolation})`, f.kvm ? "approved" : "pending") : null),
      pairs({CIDs: `${n.cid_first}–${n.cid_last}`, Agents: fmt.n(n.agents), Host: f.hostname, OS: f.os, Kernel: f.kernel,
        CPUs: f.cpus ? `${f.cpus} × ${f.cpu_model || ""}` : undefined, Memory: f.memory_mib ? `${fmt.n(f.memory_mib)} MiB` : undefined,
        Backend: f.backend, Accelerator: f.accel, "Why not KVM": (f.reasons || []).join("; ") || undefined,
        Egress: n.egress ? `${n.egress.egress} (ports ${(n.egress.ports || []).join(", ")})` : undefined}),
      n.online ? null : h("p", {class: "empty"}, "This node is not connected: it reports no facts until it is."),
      nodeActions(n));
    });
  }, {label: "Nodes"}), ctx.live(["node"], async () => {
    try {
      const {templates} = await get("/v1/templates");
      return card("Warm templates", table([{label: "Template", value: (t) => t.key}, {label: "Size", value: (t) => fmt.n(t.bytes ?? t.size)},
        {label: "", value: (t) => action("Remove", () => del(`/v1/templates/${encodeURIComponent(t.key)}`), {label: `Remove ${t.key}`})}],
      templates, {empty: "No warm templates.", label: "Warm templates"}));
    } catch (err) {
      if (err instanceof ApiError && err.code === "no_node") return card("Warm templates", h("p", {class: "empty"}, err.message));
      throw err;
    }
  }, {label: "Templates"}));
}

// Drain, undrain and revoke a joined node (n0 is the hub's own machine: none of them).
function nodeActions(n) {
  if (n.name === "n0") return null;
  if (n.revoked) return h("p", {}, badge("revoked", "rejected"), " This node was removed for good; it can come back only with a new join code.");
  return h("p", {class: "actions"},
    n.draining ? badge("draining", "pending") : null, " ",
    n.draining ? action("Undrain", () => post(`/v1/nodes/${n.name}/undrain`, {}), {label: `Undrain ${n.name}`})
      : action("Drain", () => post(`/v1/nodes/${n.name}/drain`, {}), {label: `Drain ${n.name}`}),
    action("Revoke", () => post(`/v1/nodes/${n.name}/revoke`, {}), {label: `Revoke ${n.name}`, kind: "danger",
      confirm: {title: `Revoke node ${n.name}?`, yes: "Revoke", danger: true,
        message: "Its signatures stop working at once, its agents cannot reach the hub, and the vault gives it no more secrets. This cannot be undone."}}));
}
