//# allFunctionsCalledOnLoad
// Egress: what leaves the plaza for the outside. The proxy's settings on each node (on or off, the
// ports it opens), the fetch blocklist (edited on the Models screen, shown here), and the audit: every
// egress connection an agent made, allowed or refused, newest first, with a filter by verdict and by
// agent and "Load older". The credential rules of "Egress credentials" have no API in this hub yet,
// so the screen says so instead of showing a form that could not work.

import {get} from "../api.js";
import {badge, card, fmt, h, select, table} from "../ui.js";

const VERDICTS = [["", "Every verdict"], ["allowed", "Allowed"], ["refused", "Refused"], ["failed", "Failed"]];
const VERDICT_BADGE = {allowed: "approved", refused: "denied", failed: "pending"};
//: Audit entries per page.
const AUDIT_PAGE = 50;

function settingsCard({nodes, fetch_blocklist: blocked}) {
  return [
    card("The proxy on each node", table([{label: "Node", value: (n) => n.name},
      {label: "Connected", value: (n) => badge(n.online ? "online" : "offline", n.online ? "running" : "offline")},
      {label: "Egress", value: (n) => (n.egress ? badge(n.egress.egress, n.egress.egress === "on" ? "approved" : "denied") : "—")},
      {label: "Ports", value: (n) => (n.egress ? n.egress.ports.map(String).join(", ") : "reported when the node connects")}],
    nodes, {empty: "No nodes.", label: "Egress on each node"}),
    h("p", {class: "hint"}, "Only the ports listed are open to agents (apid --egress-ports adds ports; --egress off refuses every connection).")),
    card("Fetch blocklist", blocked.length
      ? h("ul", {class: "plain", "aria-label": "Blocked hosts"}, blocked.map((b) => h("li", {}, h("code", {}, b))))
      : h("p", {class: "empty"}, "No host is blocked: every public host is allowed."),
    h("p", {class: "hint"}, "Edit it in the policy part of the ", h("a", {href: "#/models"}, "Models screen"),
      ", one entry per line (example.com blocks the host and its subdomains, *.example.net only the subdomains).")),
    card("Credential rules", h("p", {class: "empty"},
      "Egress credential rules (a vault secret added to an agent's HTTPS request) have no API in this hub yet.")),
  ];
}

export async function render(view, ctx) {
  const verdict = select("verdict", VERDICTS, "");
  const agent = h("input", {name: "cid", size: 8, inputmode: "numeric", placeholder: "CID"});
  const verdictId = "eg-verdict", agentId = "eg-cid";
  verdict.id = verdictId;
  agent.id = agentId;
  let older = [];
  let before = null;
  const filters = () => ({verdict: verdict.value, cid: agent.value.trim(), limit: AUDIT_PAGE});
  const auditTable = (entries) => table([{label: "When", value: (e) => fmt.time(e.at)},
    {label: "Agent", value: (e) => h("a", {href: `#/agents/${e.cid}`}, e.agent ? `${e.agent} (${e.cid})` : `CID ${e.cid}`)},
    {label: "Verdict", value: (e) => badge(e.verdict || "?", VERDICT_BADGE[e.verdict] || "pending")},
    {label: "Destination", value: (e) => (e.host ? `${e.host}:${e.port}` : "(bad request)")},
    {label: "Why", value: (e) => e.why || ""}],
  entries, {empty: "No egress connections yet.", label: "Egress audit"});
  const audit = ctx.live(["agent"], async () => {
    const page = await get("/v1/egress/audit", filters());
    if (!older.length) before = page.older;
    const seen = new Set(page.entries.map((e) => e.position));
    return auditTable([...page.entries, ...older.filter((e) => !seen.has(e.position))]);
  }, {label: "Egress audit"});
  const loadOlder = h("button", {type: "button", onclick: async () => {
    if (before === null) { loadOlder.textContent = "No older entries"; return; }
    const page = await get("/v1/egress/audit", {...filters(), before});
    older = [...older, ...page.entries];
    before = page.older;
    audit.reload();
  }}, "Load older");
  for (const el of [verdict, agent]) el.addEventListener("change", () => { older = []; audit.reload(); });

  view.append(
    ctx.live(["node", "models"], async () => settingsCard(await get("/v1/egress")), {label: "Egress settings"}),
    card("Audit", h("p", {class: "hint"}, "Every connection an agent's machine opens to the outside, allowed or refused, as its transcript records it."),
      h("div", {class: "row"}, h("label", {for: verdictId}, "Verdict"), verdict, h("label", {for: agentId}, "Agent"), agent),
      audit, loadOlder));
}
