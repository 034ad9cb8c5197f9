//# allFunctionsCalledOnLoad
// Approvals: the decisions that wait for the owner, by kind; the exact call or payment; approve or deny
// with a reason.

import {get, post} from "../api.js";
import {action, badge, card, fmt, h, pairs, select} from "../ui.js";
import {rich} from "../chips.js";

const KINDS = ["call", "payment", "sanction", "agent", "project", "motion", "tool_version"];

export async function render(view, ctx) {
  const status = select("status", [["pending", "Pending"], ["approved", "Approved"], ["denied", "Denied"], ["", "All"]], "pending");
  let section;
  status.addEventListener("change", () => section.reload());
  view.append(h("div", {class: "row"}, h("label", {for: "appr-status"}, "Show"), Object.assign(status, {id: "appr-status"})));
  section = ctx.live(["approvals", "treasury", "conduct"], async () => {
    const {approvals} = await get("/v1/approvals", {status: status.value || undefined});
    if (!approvals.length) return h("p", {class: "empty"}, "Nothing waits for you.");
    const kinds = KINDS.filter((k) => approvals.some((a) => a.kind === k));
    return kinds.map((k) => card(`${k[0].toUpperCase()}${k.slice(1).replace("_", " ")} (${approvals.filter((a) => a.kind === k).length})`,
      approvals.filter((a) => a.kind === k).map((a) => h("article", {class: "approval", "data-approval": a.id},
        h("h3", {}, a.id, " ", rich(a.title), " ", badge(a.status)),
        pairs({"Asked by": a.requested_by, "Asked": fmt.time(a.requested_at),
          ...(a.kind === "payment" ? {Amount: fmt.credits(a.detail.amount), From: "@" + a.detail.payer, To: "@" + a.detail.payee,
            Memo: a.detail.memo} : {}),
          ...(a.decided_at ? {Decided: `${fmt.time(a.decided_at)} by ${a.decided_by}`, Why: a.decision_reason} : {})}),
        a.kind !== "payment" ? h("details", {}, h("summary", {}, "The exact request"),
          h("pre", {}, JSON.stringify(a.detail, null, 2))) : null,
        a.status === "pending" ? h("div", {class: "actions"},
          action("Approve", (reason) => post(`/v1/approvals/${a.id}/approve`, reason ? {reason} : {}).then(() => "Approved."),
            {kind: "primary", label: `Approve ${a.id}`, confirm: {title: `Approve ${a.id}?`, message: a.title, reason: "Reason (optional)", yes: "Approve"}}),
          action("Deny", (reason) => post(`/v1/approvals/${a.id}/deny`, reason ? {reason} : {}).then(() => "Denied."),
            {label: `Deny ${a.id}`, confirm: {title: `Deny ${a.id}?`, message: a.title, reason: "Reason (optional)", yes: "Deny", danger: true}}))
          : null))));
  }, {label: "Approvals"});
  view.append(section);
}
