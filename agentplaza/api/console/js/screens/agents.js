//# allFunctionsCalledOnLoad
// Agents: the roster, the spawn wizard (Purpose, Role, Tools and limits, Prompt, Review and spawn; 1 to 16
// at a time) and the agent page (header actions, profile, permission mode, transcript, Conduct, message box).

import {del, get, patch, post} from "../api.js";
import {action, badge, card, field, fill, fmt, form, h, pairs, select, table} from "../ui.js";
import {rich} from "../chips.js";

//: "You can start 1 to 16 agents at a time."
export const SPAWN_MAX = 16;
const STEPS = ["Purpose", "Role", "Tools and limits", "Prompt", "Review and spawn"];
const MODES = [["autonomous", "Autonomous"], ["ask", "Ask first"], ["read-only", "Read-only"]];
const SOURCES = {agent: "set for this agent", role: "from its role", default: "the plaza's default"};

export async function render(view, ctx) {
  if (ctx.params[0]) return agentPage(view, ctx, ctx.params[0]);
  const wizard = h("div");
  view.append(h("div", {class: "actions"}, h("button", {type: "button", class: "primary",
    onclick: () => spawnWizard(wizard)}, "Spawn agents")), wizard,
  ctx.live(["agent", "node"], async () => {
    const {agents} = await get("/v1/agents");
    return table([{label: "Agent", value: (a) => h("a", {href: `#/agents/${a.cid}`}, a.name || `Agent ${a.cid}`), sort: (a) => a.cid},
      {label: "CID", value: (a) => String(a.cid), sort: (a) => a.cid},
      {label: "Role", value: (a) => a.role, sort: (a) => a.role},
      {label: "Status", value: (a) => badge(a.status), sort: (a) => a.status},
      {label: "Model", value: (a) => a.resolved_model || "—"},
      {label: "Node", value: (a) => a.node || "—"},
      {label: "Working on", value: (a) => a.working_on ? rich("#" + a.working_on.replace(/^t/, "")) : "—"},
      {label: "Queue", value: (a) => fmt.n(a.queue), sort: (a) => a.queue}], agents,
    {sortable: true, empty: "No agents yet. Choose Spawn agents.", label: "The roster"});
  }, {label: "The roster"}));
}

async function spawnWizard(host) {
  const [{roles}, {nodes}] = await Promise.all([get("/v1/society/roles"), get("/v1/nodes")]);
  const choice = {purpose: "", role: "builder", count: 1, model: "", prompt: ""};
  let step = 0;
  const body = h("div");
  const dialog = h("section", {class: "card wizard", "aria-label": "Spawn agents"}, body);
  fill(host, dialog);
  const draw = () => {
    const steps = h("ol", {class: "tabs", "aria-label": "Steps"}, STEPS.map((s, i) => h("li", {},
      h("button", {type: "button", "aria-selected": String(i === step), onclick: () => { step = i; draw(); }}, `${i + 1}. ${s}`))));
    let content;
    if (step === 0) {
      const purpose = h("textarea", {rows: 3, oninput: (e) => { choice.purpose = e.target.value; }}, choice.purpose);
      content = field("What are these agents for?", purpose, "A note for yourself; the role decides what they may do.");
    } else if (step === 1) {
      const role = select("role", roles.filter((r) => r.role !== "orchestrator").map((r) => [r.role, `${r.role}: ${r.what}`]), choice.role);
      role.addEventListener("change", () => { choice.role = role.value; });
      const count = h("input", {type: "number", min: 1, max: SPAWN_MAX, value: choice.count,
        oninput: (e) => { choice.count = Number(e.target.value); }});
      content = [field("Role", role), field(`How many (1–${SPAWN_MAX})`, count)];
    } else if (step === 2) {
      const r = roles.find((x) => x.role === choice.role) || {};
      const model = h("input", {value: choice.model, placeholder: "provider/model", oninput: (e) => { choice.model = e.target.value; }});
      content = [pairs({Role: choice.role, Tier: r.tier, "What it does": r.what}),
        field("Model", model, "Leave empty to use the role's model or the plaza's default."),
        h("p", {}, "The role's tools and budget come from the plaza's laws; see Rules.")];
    } else if (step === 3) {
      const prompt = h("textarea", {rows: 4, oninput: (e) => { choice.prompt = e.target.value; }}, choice.prompt);
      content = field("First message (optional)", prompt, "Sent to each agent with tell once it is spawned.");
    } else {
      const bootable = nodes.filter((n) => n.online && n.facts && n.facts.kvm !== false);
      content = [pairs({Purpose: choice.purpose || "—", Role: choice.role, Count: String(choice.count),
        Model: choice.model || "the role's model or the default", "First message": choice.prompt || "—"}),
      bootable.length ? null : h("p", {class: "error", role: "alert", "data-testid": "no-node"},
        "No node can boot microVMs now: " + (nodes.length ? nodes.map((n) => `${n.name} is ${n.online ? "online without KVM" : "offline"}`).join(", ")
          : "this hub has no node") + ". The agents will wait offline until a node with a hypervisor (KVM) runs them."),
      form({label: "Spawn", submit: `Spawn ${choice.count} ${choice.role}`, fields: [],
        send: async () => {
          const out = await post("/v1/agents", {role: choice.role, count: choice.count, model: choice.model || undefined});
          if (choice.prompt) for (const a of out.agents) await post(`/v1/agents/${a.cid}/tell`, {text: choice.prompt});
          return `Spawned ${out.agents.map((a) => a.cid).join(", ")}.`;
        }})];
    }
    fill(body, h("h2", {}, "Spawn agents"), steps, h("div", {class: "step"}, content), h("div", {class: "actions"},
      step > 0 ? h("button", {type: "button", onclick: () => { step -= 1; draw(); }}, "Back") : null,
      step < STEPS.length - 1 ? h("button", {type: "button", class: "primary", onclick: () => { step += 1; draw(); }}, "Next") : null,
      h("button", {type: "button", onclick: () => fill(host)}, "Close")));
  };
  draw();
}

function agentPage(view, ctx, cid) {
  const header = ctx.live(["agent", "conduct", "node"], async () => {
    const {agent: a, conduct: c} = await get(`/v1/agents/${cid}`);
    const act = (name, label, ask) => action(label, (reason) => post(`/v1/agents/${a.cid}/${name}`, reason ? {reason} : {}),
      {confirm: ask ? {title: `${label} agent ${a.cid}?`, message: ask, reason: "Reason", danger: true, yes: label} : null});
    const modeSel = select("mode", MODES, c.mode);
    modeSel.id = "agent-mode";
    return [
      h("h2", {}, a.name || `Agent ${a.cid}`, " ", badge(a.status)),
      h("div", {class: "actions", role: "toolbar", "aria-label": "Agent actions"},
        act("restart", "Restart"), act("stop", "Stop", "Its VM stops; its state is kept."),
        act("wipe", "Wipe", "Its workspace is wiped."), act("retire", "Retire", "The agent retires for good."),
        action("Delete", () => del(`/v1/agents/${a.cid}`).then(() => { location.hash = "#/agents"; }), {confirm: {title: `Delete agent ${a.cid}?`, message: "Stops the agent and deletes its VM run.", danger: true, yes: "Delete"}}),
        act("sleep", "Sleep"), act("wake", "Wake"),
        action("Checkpoint", () => post(`/v1/agents/${a.cid}/checkpoint`, {}).then((o) => `Checkpoint ${o.name || "taken"}.`)),
        action("Fork", () => post(`/v1/agents/${a.cid}/fork`, {n: 1}).then(() => "Forked.")),
        a.status === "working" ? act("cancel", "Cancel work") : null),
      card("Profile", pairs({CID: String(a.cid), Role: a.role, Status: a.status, Model: a.resolved_model || "—",
        "Where the model comes from": SOURCES[a.model_source] || a.model_source, Node: a.node, Queue: fmt.n(a.queue),
        "Working on": a.working_on || "—", Created: fmt.time(a.created_at)}),
      form({label: "Change model", submit: "Change model", fields: [field("Model", h("input", {name: "model", placeholder: "provider/model or default"}))],
        send: (d) => patch(`/v1/agents/${a.cid}`, {model: String(d.get("model"))}).then(() => "Model changed.")})),
      card("Permission mode", h("div", {class: "row"}, h("label", {for: "agent-mode"}, "Mode"), modeSel,
        action("Set mode", () => post(`/v1/conduct/${a.cid}/mode`, {mode: modeSel.value}).then(() => "Mode set.")))),
      card("Conduct", pairs({Offences: fmt.n(c.offences), Warnings: fmt.n(c.warnings), Fined: fmt.credits(c.fined)}),
        table([{label: "Suspension", value: (s) => s.what || s.kind || s.id}, {label: "Until", value: (s) => fmt.time(s.until)},
          {label: "", value: (s) => action("Lift", (reason) => post(`/v1/conduct/${a.cid}/suspensions/${s.id}/lift`, reason ? {reason} : {}),
            {label: `Lift suspension ${s.id}`, confirm: {title: "Lift this suspension?", reason: "Reason", yes: "Lift"}})}],
        c.in_force || [], {empty: "No suspension in force.", label: "Suspensions in force"}),
        table([{label: "Sanction", value: (s) => s.kind || s.what || JSON.stringify(s)}, {label: "When", value: (s) => fmt.time(s.at)}],
          c.sanctions || [], {empty: "No sanctions.", label: "Sanctions"})),
    ];
  }, {label: "The agent"});
  const transcript = ctx.live(["agent"], async () => {
    const {transcript: entries} = await get(`/v1/agents/${cid}/logs`);
    if (!entries.length) return h("p", {class: "empty"}, "The transcript is empty.");
    return h("ol", {class: "transcript"}, entries.map((e) => h("li", {},
      h("small", {}, fmt.time(e.at), " · ", e.kind, e.tool ? ` · ${e.tool}` : ""),
      e.detail && e.detail.decision ? [" ", badge(e.detail.decision)] : null,
      h("div", {}, rich(e.text || "")))));
  }, {label: "Transcript"});
  let opened = null;  // the note the owner opened, by its slug
  const memory = ctx.live(["memory", "conduct"], async () => {
    const [{notes}, one] = await Promise.all([get(`/v1/agents/${cid}/memory`),
      opened ? get(`/v1/agents/${cid}/memory`, {note: opened}) : Promise.resolve({note: null})]);
    const open = (slug) => () => { opened = slug; memory.reload(); };
    const list = table([
      {label: "Note", value: (n) => h("button", {type: "button", class: "link", onclick: open(n.note),
        "aria-label": `Open the note ${n.title}`}, n.title)},
      {label: "Links to", value: (n) => n.links.join(", ") || "—"},
      {label: "Linked from", value: (n) => n.backlinks.join(", ") || "—"},
      {label: "By", value: (n) => (n.by === "plaza" ? "the plaza" : "the agent")},
      {label: "Updated", value: (n) => fmt.time(n.updated_at)},
    ], notes, {label: "Memory notes", empty: "No notes yet: the agent writes them with plaza_memory_write."});
    const note = one.note;
    return [list, note ? h("article", {class: "memory-note", "aria-label": `The note ${note.title}`},
      h("h3", {}, note.title), h("div", {class: "memory-text"}, rich(note.text))) : null];
  }, {label: "Memory"});
  const message = h("textarea", {name: "text", rows: 3, required: true});
  view.append(h("p", {}, h("a", {href: "#/agents"}, "← The roster")), header, card("Transcript", transcript),
    card("Memory", memory),
    card("Message", form({label: "Message the agent", submit: "Send", fields: [field("Message", message)],
      send: async (d, el) => { await post(`/v1/agents/${cid}/tell`, {text: String(d.get("text"))}); el.reset(); return "Sent."; }})));
}
