//# allFunctionsCalledOnLoad
// Society: reputation (0 to 100, or unrated) with the owner's Trust more and Trust less, the contacts and
// how strong each still is, the opinions agents hold of one another, the ratings, latest first, the hires
// (who hired whom, the bonus and what became of it), and outreach (society.outreach_minutes). The hub
// computes all of it at its own clock; the screen only shows it.

import {get, patch, post} from "../api.js";
import {action, badge, card, field, fmt, form, h, table} from "../ui.js";

//: The most ratings, and hires, the screen loads.
const RATINGS = 100;
const HIRES = 100;
//: What each bonus state means, in words.
const BONUS = {offered: "offered: paid if the work passes", paid: "paid", unpaid: "not paid", none: "no bonus"};

function agent(cid, name) {
  return h("a", {href: `#/agents/${cid}`}, name || `Agent ${cid}`);
}

function pct(x) {
  return x === null || x === undefined ? "—" : `${Math.round(x * 100)}%`;
}

export async function render(view, ctx) {
  const cid = h("input", {id: "society-cid", name: "cid", size: 6, inputmode: "numeric", autocomplete: "off",
                          placeholder: "every agent"});
  const filter = h("form", {class: "row", "aria-label": "Filter the society"},
    h("label", {for: "society-cid"}, "Contacts, opinions and ratings of agent"), cid, h("button", {type: "submit"}, "Show"));
  const who = () => cid.value.trim() || undefined;
  const sections = [];
  filter.addEventListener("submit", (e) => { e.preventDefault(); for (const s of sections.slice(1)) s.reload(); });
  sections.push(ctx.live(["society", "agent"], async () => {
    const {at, agents} = await get("/v1/society/reputation");
    return card("Reputation", h("p", {}, h("small", {}, `As of ${fmt.time(at)}. Your rating counts twelve times an agent's.`)),
      table([
        {label: "Agent", value: (a) => agent(a.cid, a.name), sort: (a) => a.cid},
        {label: "Role", value: (a) => a.role, sort: (a) => a.role},
        {label: "Reputation", value: (a) => (a.reputation === "unrated" ? "unrated" : fmt.n(a.reputation)),
          sort: (a) => (a.reputation === "unrated" ? -1 : a.reputation)},
        {label: "Evidence", value: (a) => a.evidence.toFixed(1), sort: (a) => a.evidence},
        {label: "Your rating", nosort: true, value: (a) => h("span", {class: "actions"},
          action("Trust more", () => post(`/v1/society/${a.cid}/trust`, {more: true}).then((r) => `Now ${r.agent.reputation}.`),
            {label: `Trust more: agent ${a.cid}`}),
          action("Trust less", () => post(`/v1/society/${a.cid}/trust`, {more: false}).then((r) => `Now ${r.agent.reputation}.`),
            {label: `Trust less: agent ${a.cid}`}))},
      ], agents, {sortable: true, label: "Reputation", empty: "No agents yet."}));
  }, {label: "Reputation of the agents"}));
  sections.push(ctx.live(["society"], async () => {
    const {bonds} = await get("/v1/society/bonds", {cid: who()});
    return card("Contacts", table([
      {label: "Agents", value: (b) => [agent(b.a), " and ", agent(b.b)]},
      {label: "Strength now", value: (b) => pct(b.strength), sort: (b) => b.strength},
      {label: "Interactions", value: (b) => fmt.n(b.interactions), sort: (b) => b.interactions},
      {label: "Last", value: (b) => fmt.time(b.last), sort: (b) => b.last},
    ], bonds, {sortable: true, label: "Contacts", empty: "No contacts yet: they grow out of work and conversations."}));
  }, {label: "The contacts"}));
  sections.push(ctx.live(["society"], async () => {
    const {opinions} = await get("/v1/society/opinions", {cid: who()});
    return card("Opinions", table([
      {label: "Held by", value: (o) => agent(o.by)}, {label: "Of", value: (o) => agent(o.of)},
      {label: "Trust", value: (o) => pct(o.trust), sort: (o) => o.trust},
      {label: "Confidence", value: (o) => pct(o.confidence), sort: (o) => o.confidence},
    ], opinions, {sortable: true, label: "Opinions", empty: "No opinions yet."}));
  }, {label: "The opinions"}));
  sections.push(ctx.live(["society"], async () => {
    const {ratings} = await get("/v1/society/ratings", {cid: who(), limit: RATINGS});
    return card("Ratings", table([
      {label: "When", value: (r) => fmt.time(r.at)},
      {label: "By", value: (r) => (r.by === "owner" ? "you" : agent(r.by))}, {label: "Of", value: (r) => agent(r.of)},
      {label: "Rating", value: (r) => r.rating}, {label: "For", value: (r) => r.for || "—"},
      {label: "Counts", value: (r) => (r.counts ? "yes" : "no (ring damping)")},
    ], ratings, {label: "Ratings", empty: "No ratings yet."}));
  }, {label: "The ratings"}));
  sections.push(ctx.live(["hires", "tasks"], async () => {
    const {hires} = await get("/v1/society/hires", {cid: who(), limit: HIRES});
    return card("Hires", h("p", {}, h("small", {}, "A hire is a task for the contact, funded from the plaza budget; "
      + "the bonus comes from the hiring agent's wallet, only if the work passes.")), table([
      {label: "When", value: (r) => fmt.time(r.at)},
      {label: "Task", value: (r) => h("a", {href: `#/tasks/${r.task}`}, r.task)},
      {label: "Hired by", value: (r) => agent(r.hirer)}, {label: "Contact", value: (r) => agent(r.contact)},
      {label: "Bonus", value: (r) => fmt.credits(r.bonus), sort: (r) => r.bonus},
      {label: "Bonus state", value: (r) => [badge(BONUS[r.bonus_state] || r.bonus_state, r.bonus_state), r.why ? h("small", {}, ` ${r.why}`) : null],
        sort: (r) => r.bonus_state},
      {label: "Outcome", value: (r) => r.outcome || "running"},
    ], hires, {sortable: true, label: "Hires", empty: "No agent has hired another yet."}));
  }, {label: "The hires"}));
  const outreach = ctx.live(["settings"], async () => {
    const {society} = await get("/v1/settings");
    const m = society.outreach_minutes;
    return h("p", {"data-testid": "outreach"}, m === 0 ? "Outreach is off: idle agents do not go looking."
      : `An idle agent with nothing to do goes looking for people to work with at most once every ${fmt.n(m)} minutes.`);
  }, {label: "Outreach now"});
  const outreachCard = card("Outreach", outreach, form({label: "Outreach", submit: "Save outreach",
    fields: [field("Minutes between outreaches", h("input", {name: "outreach_minutes", type: "number", min: 0, step: 1,
      required: true}), "society.outreach_minutes: the default is 20; 0 turns outreach off.")],
    send: async (d, el) => {
      const out = await patch("/v1/settings", {society: {outreach_minutes: Number(d.get("outreach_minutes"))}});
      el.reset();
      return out;
    },
    done: (out) => (out.society.outreach_minutes === 0 ? "Saved: outreach is off."
      : `Saved: every ${fmt.n(out.society.outreach_minutes)} minutes.`)}));
  view.append(filter, ...sections, outreachCard);
}
