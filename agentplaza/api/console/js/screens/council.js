//# allFunctionsCalledOnLoad
// Council: the motions of the four seats with their votes; the owner decides the ones the count gives them
// (a tie, or a carried motion that needs ratification), approve or reject with an optional note.

import {get, post} from "../api.js";
import {action, badge, card, fmt, h, pairs, select, table} from "../ui.js";
import {rich} from "../chips.js";

//: The four seats, in the guide's words.
export const SEATS = [["finance", "Finance"], ["counsel", "Legal (counsel)"], ["incident", "Incident response"],
                      ["mayor", "The Mayor's office"]];

export async function render(view, ctx) {
  const status = select("status", [["", "All"], ["waiting", "Waiting for you"], ["open", "Open"], ["carried", "Carried"],
                                   ["rejected", "Rejected"]], "");
  let section;
  status.addEventListener("change", () => section.reload());
  view.append(h("div", {class: "row"}, h("label", {for: "council-status"}, "Show"), Object.assign(status, {id: "council-status"})));
  section = ctx.live(["council", "approvals"], async () => {
    const {motions} = await get("/v1/council/motions", {status: status.value || undefined});
    if (!motions.length) return h("p", {class: "empty"}, "No motions. Only the four seats propose them.");
    return motions.map((m) => h("article", {class: "motion card", "data-motion": m.id},
      h("h3", {}, m.id, " ", rich(m.title), " ", badge(m.status === "waiting" ? "waiting for you" : m.status,
        m.status === "waiting" ? "pending" : m.status === "carried" ? "approved" : m.status === "rejected" ? "denied" : m.status)),
      pairs({Kind: m.kind.replace("_", " "), "Proposed by": m.seat, Proposed: fmt.time(m.at),
        ...(m.kind === "budget_move" ? {Amount: fmt.credits(m.amount), To: "@" + m.to} : {}),
        ...(m.result ? {Count: m.result} : {}),
        ...(m.owner ? {"Your decision": (m.owner.approve ? "approved" : "rejected") + (m.owner.note ? `: ${m.owner.note}` : "")} : {}),
        ...(m.moved ? {Credits: m.moved.note} : {})}),
      m.text ? h("p", {}, m.text) : null,
      table([{label: "Seat", value: ([s, name]) => name},
             {label: "Vote", value: ([s]) => m.votes[s] ? m.votes[s].vote : "—"},
             {label: "Why", value: ([s]) => m.votes[s] ? m.votes[s].why : ""}], SEATS, {label: `Votes on ${m.id}`}),
      m.status === "waiting" ? h("div", {class: "actions"},
        action("Approve", (reason) => post(`/v1/council/motions/${m.id}/decide`, {decision: "approve", ...(reason ? {reason} : {})})
          .then(() => "Approved."), {kind: "primary", label: `Approve ${m.id}`,
          confirm: {title: `Approve ${m.id}?`, message: m.title, reason: "Note (optional)", yes: "Approve"}}),
        action("Reject", (reason) => post(`/v1/council/motions/${m.id}/decide`, {decision: "reject", ...(reason ? {reason} : {})})
          .then(() => "Rejected."), {label: `Reject ${m.id}`,
          confirm: {title: `Reject ${m.id}?`, message: m.title, reason: "Note (optional)", yes: "Reject", danger: true}}))
        : null));
  }, {label: "Motions"});
  view.append(section);
}
