//# allFunctionsCalledOnLoad
// Nodes: the machines that run agents (their facts, load, CIDs, online or offline; the isolation level
// the probe found, hardware KVM or emulation), Add a node (a join code, shown once, then only its
// listing), the join codes with Revoke for an unused one, Rotate owner token (on the hub's own machine
// only: the hub refuses it from elsewhere, and the refusal shows beside the button), and the warm
// templates.

import {ApiError, del, get, post} from "../api.js";
import {action, badge, card, field, fill, fmt, form, h, pairs, table} from "../ui.js";

//: "A code is valid for 15 minutes by default, and for at most 60." (domain/nodes.py TTL_MIN_*)
const TTL_MIN_DEFAULT = 15, TTL_MIN_MIN = 1, TTL_MIN_MAX = 60;
const CODE_BADGE = {open: "pending", used: "approved", revoked: "denied", expired: "offline", ended: "denied"};

function load(n) {
  const size = n.cid_last - n.cid_first + 1;
  const id = `load-${n.name}`;
  return h("div", {class: "field"}, h("label", {for: id}, `CIDs in use: ${fmt.n(n.agents)} of ${fmt.n(size)}`),
    h("meter", {id, min: 0, max: size, value: n.agents, high: Math.round(size * 0.9)}));
}

function nodeCard(n) {
  const f = n.facts || {};
  return card(`Node ${n.name}`, h("p", {}, badge(n.online ? "online" : "offline", n.online ? "running" : "offline"), " ",
    f.isolation ? badge(f.kvm ? `hardware KVM (${f.isolation})` : `emulation (${f.isolation})`, f.kvm ? "approved" : "pending") : null),
  load(n),
  pairs({Label: n.label, CIDs: `${fmt.n(n.cid_first)}–${fmt.n(n.cid_last)}`, Agents: fmt.n(n.agents),
    Joined: n.joined_at ? fmt.time(n.joined_at) : undefined, Host: f.hostname, OS: f.os, Kernel: f.kernel,
    CPUs: f.cpus ? `${f.cpus} × ${f.cpu_model || ""}` : undefined, Memory: f.memory_mib ? `${fmt.n(f.memory_mib)} MiB` : undefined,
    Backend: f.backend, Accelerator: f.accel, "Why not KVM": (f.reasons || []).join("; ") || undefined,
    Egress: n.egress ? `${n.egress.egress} (ports ${(n.egress.ports || []).join(", ")})` : undefined}),
  n.online ? null : h("p", {class: "empty"}, "This node is not connected: it reports no facts until it is."),
  nodeActions(n));
}

function addNode() {
  const label = h("input", {name: "label", required: true, maxlength: 40, autocomplete: "off", placeholder: "atlas"});
  const ttl = h("input", {name: "ttl_min", type: "number", min: TTL_MIN_MIN, max: TTL_MIN_MAX, value: TTL_MIN_DEFAULT, required: true});
  const made = h("div", {"aria-live": "polite"});
  return card("Add a node", h("p", {}, "Make a join code for another machine. It works once, and it is shown only now."),
    form({label: "Add a node", submit: "Make join code",
      fields: [field("Label", label, "The node's name in the list."), field("Valid for (minutes)", ttl, `${TTL_MIN_MIN} to ${TTL_MIN_MAX}; ${TTL_MIN_DEFAULT} by default.`)],
      send: async (_, el) => {
        const {code} = await post("/v1/join-codes", {label: label.value.trim(), ttl_min: Number(ttl.value)});
        el.reset();
        ttl.value = TTL_MIN_DEFAULT;  // reset() empties a value set as a property
        fill(made, h("div", {class: "card shown-once", role: "region", "aria-label": "The new join code"},
          h("p", {}, h("strong", {}, `The join code for ${code.label}. `), `It is shown this once and works until ${fmt.time(code.expires_at)}. On the new machine run:`),
          h("pre", {"data-testid": "join-code", tabindex: 0, "aria-label": "The command with the join code"}, `agentplaza node join ${code.code}`),
          h("button", {type: "button", onclick: () => fill(made)}, "I copied it")));
        return `Made a code for ${code.label}.`;
      }}), made);
}

function codesTable(codes) {
  return table([{label: "Id", value: (c) => c.id}, {label: "Label", value: (c) => c.label},
    {label: "State", value: (c) => badge(c.state, CODE_BADGE[c.state] || "pending")},
    {label: "Made", value: (c) => fmt.time(c.made_at)}, {label: "Expires", value: (c) => fmt.time(c.expires_at)},
    {label: "Node", value: (c) => c.node || "—"}, {label: "Failed tries", value: (c) => fmt.n(c.failures)},
    {label: "", value: (c) => (c.state === "open"
      ? action("Revoke", () => post(`/v1/join-codes/${encodeURIComponent(c.id)}/revoke`).then(() => "Revoked."),
        {label: `Revoke join code ${c.label}`, kind: "danger", confirm: {title: `Revoke the code for ${c.label}?`,
          message: "The code stops working at once.", reason: false, danger: true, yes: "Revoke"}})
      : "")}],
  codes, {empty: "No join codes yet.", label: "Join codes"});
}

function ownerToken() {
  const shown = h("div", {"aria-live": "polite"});
  return card("Owner token", h("p", {}, "Rotating replaces the owner token: the old one, and every other sign-in made with it, stop at once. ",
    "It works only from the hub's own machine, where the console needs no token."),
  action("Rotate owner token", async () => {
    // Every other sign-in ends with the old token; this browser's goes on (the hub keeps the sign-in that
    // rotated it), so nothing the console has in flight meanwhile is refused.
    const {token, file} = await post("/v1/hub/owner-token/rotate");
    fill(shown, h("div", {class: "card shown-once", role: "region", "aria-label": "The new owner token"},
      h("p", {}, h("strong", {}, "The new owner token. "), `It is shown this once; the command line on this machine reads it from ${file}.`),
      h("pre", {"data-testid": "owner-token", tabindex: 0, "aria-label": "The new owner token"}, token),
      h("button", {type: "button", onclick: () => fill(shown)}, "I copied it")));
    return "Rotated.";
  }, {kind: "danger", confirm: {title: "Rotate the owner token?", message: "Every other machine signed in with the old token is signed out.",
    reason: false, danger: true, yes: "Rotate"}}), shown);
}

export async function render(view, ctx) {
  view.append(
    ctx.live(["node", "node_registry", "agent"], async () => (await get("/v1/nodes")).nodes.map(nodeCard), {label: "Nodes"}),
    addNode(),
    ctx.live(["join_code", "node_registry"], async () => card("Join codes", codesTable((await get("/v1/join-codes")).codes)),
      {label: "Join codes"}),
    ownerToken(),
    ctx.live(["node"], async () => {
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
