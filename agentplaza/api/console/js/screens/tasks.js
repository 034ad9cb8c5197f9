//# allFunctionsCalledOnLoad
// Tasks: lanes by state (Open, In progress, Done, Failed, Withdrawn), create, and each task's page with
// assign, withdraw, the timeline, bids and award.

import {get, post} from "../api.js";
import {action, badge, card, field, fmt, form, h, money, pairs, table} from "../ui.js";
import {rich} from "../chips.js";

//: The lanes, in the guide's words, and the task states each shows.
export const LANES = [["Open", "open"], ["In progress", "claimed"], ["Done", "done"], ["Failed", "failed"],
                      ["Withdrawn", "withdrawn"]];
//: The most tasks a lane loads.
const LANE_LIMIT = 500;

export async function render(view, ctx) {
  if (ctx.params[0]) return taskPage(view, ctx, ctx.params[0]);
  view.append(
    h("details", {class: "card"}, h("summary", {}, "Create a task"), form({
      label: "Create a task", submit: "Create task",
      fields: [field("Title", h("input", {name: "title", required: true})),
        field("Acceptance", h("input", {name: "acceptance", required: true}), "What counts as done."),
        field("Details", h("textarea", {name: "details", rows: 3})),
        field("Role", h("input", {name: "role"}), "A task with a role is an open call for bids."),
        field("Budget (credits)", h("input", {name: "budget", type: "number", min: 1}), "Default 2,000.")],
      send: async (d, el) => {
        const body = {title: d.get("title"), acceptance: d.get("acceptance"), details: d.get("details") || ""};
        if (d.get("role")) body.role = d.get("role");
        if (d.get("budget")) body.budget = Number(d.get("budget"));
        const t = await post("/v1/tasks", body);
        el.reset();
        return `Created ${t.id}.`;
      }})),
    ctx.live(["tasks"], async () => {
      const {tasks} = await get("/v1/tasks", {limit: LANE_LIMIT});
      return h("div", {class: "lanes"}, LANES.map(([name, state]) => {
        const mine = tasks.filter((t) => t.state === state);
        return h("section", {class: "lane", "aria-label": name, "data-lane": state},
          h("h2", {}, `${name} (${mine.length})`),
          mine.length ? h("ul", {}, mine.map((t) => h("li", {"data-task": t.id},
            h("a", {href: `#/tasks/${t.id}`}, `${t.id} `, t.title),
            h("div", {}, money(t.budget)), t.worker ? h("small", {}, "worker ", t.worker) : null,
            t.role ? h("small", {}, " role ", t.role) : null)))
            : h("p", {class: "empty"}, "None."));
      }));
    }, {label: "Tasks by state"}));
}

function taskPage(view, ctx, number) {
  view.append(h("p", {}, h("a", {href: "#/tasks"}, "← All tasks")), ctx.live(["tasks", "treasury"], async () => {
    const [t, tl] = await Promise.all([get(`/v1/tasks/${number}`), get(`/v1/tasks/${number}/timeline`)]);
    const ended = ["done", "failed", "withdrawn"].includes(t.state);
    const worker = h("input", {name: "worker", required: true, size: 6});
    return [
      h("h2", {}, `${t.id}: `, rich(t.title), " ", badge(t.state)),
      pairs({Acceptance: t.acceptance, Details: t.details || "—", Budget: money(t.budget), Role: t.role,
        Worker: t.worker, Reviewer: t.reviewer, Phase: t.phase, Created: `${fmt.time(t.created_at)} by ${t.created_by}`}),
      ended ? null : h("div", {class: "actions"},
        form({label: "Assign", submit: "Assign", fields: [field("Worker (CID)", worker)],
          send: (d) => post(`/v1/tasks/${t.id}/assign`, {worker: String(d.get("worker"))}).then(() => "Assigned.")}),
        action("Withdraw", (reason) => post(`/v1/tasks/${t.id}/withdraw`, reason ? {reason} : {}),
          {confirm: {title: `Withdraw ${t.id}?`, message: "Its escrow goes back to the plaza budget.", reason: "Reason", yes: "Withdraw", danger: true}})),
      card("Bids", table([{label: "Worker", value: (b) => b.worker}, {label: "Price", value: (b) => money(b.price)},
        {label: "When", value: (b) => fmt.time(b.at)},
        {label: "", value: (b) => t.state === "open" ? action("Award", () => post(`/v1/tasks/${t.id}/award`, {worker: b.worker}),
          {label: `Award ${t.id} to ${b.worker}`}) : ""}], t.bids, {empty: "No bids.", label: "Bids"})),
      card("Timeline", table([{label: "When", value: (e) => fmt.time(e.at)}, {label: "What", value: (e) => e.event},
        {label: "State", value: (e) => badge(e.state)}, {label: "Who", value: (e) => e.actor},
        {label: "Why", value: (e) => rich(e.reason || "")}], tl.timeline, {label: "Timeline"})),
    ];
  }, {label: "The task"}));
}
