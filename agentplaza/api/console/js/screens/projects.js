//# allFunctionsCalledOnLoad
// Projects: every project with its stage in the guide's eight; a project's page with its documents and
// moves in order, and the owner's approve, send back, veto and flag.

import {get, post} from "../api.js";
import {action, badge, card, fmt, h, pairs, table} from "../ui.js";
import {rich} from "../chips.js";

//: The eight stages, in order, as the guide names them.
export const STAGES = [["brief", "Brief"], ["research", "Research"], ["proposal", "Proposal"], ["critique", "Critique"],
                       ["approval", "Approval"], ["implementation", "Implementation"], ["review", "Review"],
                       ["delivered", "Delivered"]];
const NAME = Object.fromEntries(STAGES);

export async function render(view, ctx) {
  if (ctx.params[0]) return projectPage(view, ctx, ctx.params[0]);
  view.append(ctx.live(["projects"], async () => {
    const {projects} = await get("/v1/projects");
    return table([
      {label: "Project", value: (p) => h("a", {href: `#/projects/${p.id}`}, p.id), sort: (p) => p.seq},
      {label: "Title", value: (p) => rich(p.title), sort: (p) => p.title},
      {label: "Kind", value: (p) => p.kind},
      {label: "Stage", value: (p) => badge(p.vetoed ? "vetoed" : NAME[p.stage], p.vetoed ? "denied" : p.stage),
       sort: (p) => STAGES.findIndex(([s]) => s === p.stage)},
      {label: "Revision", value: (p) => String(p.revision)},
      {label: "For you", value: (p) => p.owner_flag ? (p.owner_approved ? "approved" : "flagged") : "—"},
      {label: "Updated", value: (p) => fmt.time(p.updated_at), sort: (p) => p.updated_at},
    ], projects, {label: "Projects", sortable: true,
                  empty: "No projects yet. The orchestrator opens one for a larger goal."});
  }, {label: "Projects"}));
}

function stages(p) {
  const at = STAGES.findIndex(([s]) => s === p.stage);
  return h("ol", {class: "stages", "aria-label": "Stages"}, STAGES.map(([s, name], i) =>
    h("li", {"data-stage": s, "aria-current": i === at ? "step" : undefined, class: i < at ? "done" : i === at ? "here" : ""},
      name)));
}

function projectPage(view, ctx, number) {
  view.append(h("p", {}, h("a", {href: "#/projects"}, "← All projects")), ctx.live(["projects", "approvals"], async () => {
    const p = await get(`/v1/projects/${number}`);
    const ended = p.vetoed || p.stage === "delivered";
    const planning = ["research", "proposal", "critique", "approval"].includes(p.stage) && !p.mayor_approved;
    const doc = (d) => h("article", {class: "doc", "data-what": d.what},
      h("h3", {}, `${d.what}${d.revision ? " " + d.revision : ""}`, d.title && d.what !== "move" ? `: ${d.title}` : "",
        " ", h("small", {}, `${d.actor}, ${fmt.time(d.at)}`)),
      d.what === "move" ? h("p", {}, `${NAME[d.detail.from]} → ${NAME[d.detail.to]}: ${d.text}`)
        : d.text ? h("pre", {class: "wrap"}, d.text) : null,
      d.what === "proposal" && d.detail ? h("details", {}, h("summary", {}, "Tasks document and spec"),
        h("pre", {class: "wrap"}, d.detail.tasks), d.detail.spec ? h("pre", {class: "wrap"}, d.detail.spec) : null) : null,
      d.what === "critique" && d.detail && d.detail.revise ? badge("asks for a revision", "denied") : null,
      d.reason ? h("p", {}, "Why: ", d.reason) : null);
    return [
      h("h2", {}, `${p.id}: `, rich(p.title), " ", badge(p.vetoed ? "vetoed" : NAME[p.stage], p.vetoed ? "denied" : p.stage)),
      stages(p),
      pairs({Kind: p.kind, Revision: String(p.revision), "Flagged for you": p.owner_flag ? "yes" : "no",
        "You approved": p.owner_approved ? "yes" : "no",
        "The Mayor approved": p.mayor_approved ? `revision ${p.mayor_approved}` : "—",
        Approval: p.approval || "—", Tasks: (p.tasks || []).join(", ") || "—", Done: String(p.done)}),
      ended ? null : h("div", {class: "actions"},
        action("Approve", (reason) => post(`/v1/projects/${p.id}/approve`, reason ? {reason} : {}).then(() => "Approved."),
          {kind: "primary", label: `Approve ${p.id}`, confirm: {title: `Approve ${p.id}?`,
            message: p.stage === "approval" ? "The project moves on to Implementation." : "Your approval stands; the project moves on after its critique and the Mayor.",
            reason: "Reason (optional)", yes: "Approve"}}),
        planning ? action("Send back", (reason) => post(`/v1/projects/${p.id}/send-back`, {reason}).then(() => "Sent back."),
          {label: `Send ${p.id} back`, confirm: {title: `Send ${p.id} back?`, message: "The planner revises the plan.",
            reason: "Reason", required: true, yes: "Send back"}}) : null,
        planning ? action(p.owner_flag ? "Unflag" : "Flag for my approval",
          () => post(`/v1/projects/${p.id}/flag`, {on: !p.owner_flag}).then(() => "Done."),
          {label: p.owner_flag ? `Unflag ${p.id}` : `Flag ${p.id}`}) : null,
        action("Veto", (reason) => post(`/v1/projects/${p.id}/veto`, reason ? {reason} : {}).then(() => "Vetoed."),
          {label: `Veto ${p.id}`, confirm: {title: `Veto ${p.id}?`, message: "The project ends. A veto is final.",
            reason: "Reason (optional)", yes: "Veto", danger: true}})),
      card("Documents and moves", p.history.map(doc)),
    ];
  }, {label: `Project ${number}`}));
}
