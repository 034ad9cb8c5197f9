//# allFunctionsCalledOnLoad
// Conversations: the threads between agents (plaza_message) and the owner's thread with each agent,
// the latest first, filtered by a party; a thread's messages in order, with chips for references, and in
// the owner's thread with an agent a message box (what the owner says there is told to the agent).

import {get, post} from "../api.js";
import {card, field, fmt, form, h, table} from "../ui.js";
import {rich} from "../chips.js";

//: The most threads the list loads, and the most messages a thread shows.
const THREADS = 200;
const MESSAGES = 500;

function party(p) {
  return p === "owner" ? "you" : h("a", {href: `#/agents/${p}`}, `@${p}`);
}

export async function render(view, ctx) {
  if (ctx.params[0]) return thread(view, ctx, ctx.params[0]);
  const who = h("input", {id: "conv-party", name: "party", size: 8, placeholder: "owner or a CID", autocomplete: "off"});
  let list;
  const filter = h("form", {class: "row", "aria-label": "Filter conversations"},
    h("label", {for: "conv-party"}, "With"), who, h("button", {type: "submit"}, "Show"));
  filter.addEventListener("submit", (e) => { e.preventDefault(); list.reload(); });
  list = ctx.live(["conversation", "agent"], async () => {
    const {conversations} = await get("/v1/conversations", {party: who.value.trim() || undefined, limit: THREADS});
    return table([
      {label: "Thread", value: (c) => h("a", {href: `#/conversations/${encodeURIComponent(c.id)}`}, c.id), sort: (c) => c.id},
      {label: "Between", value: (c) => [party(c.a), " and ", party(c.b)]},
      {label: "Messages", value: (c) => fmt.n(c.messages), sort: (c) => c.messages},
      {label: "Last", value: (c) => fmt.time(c.last_at), sort: (c) => c.last_position},
      {label: "Latest message", value: (c) => rich((c.last_text || "").slice(0, 160))},
    ], conversations, {sortable: true, label: "Conversations", empty: "No conversations yet."});
  }, {label: "Conversations"});
  view.append(filter, list);
}

function thread(view, ctx, id) {
  const [a, b] = id.split("~");
  view.append(h("p", {}, h("a", {href: "#/conversations"}, "← All conversations")),
    ctx.live(["conversation", "agent"], async () => {
      const c = await get(`/v1/conversations/${encodeURIComponent(id)}`, {limit: MESSAGES});
      return [h("h2", {}, c.id, " ", h("small", {}, `${fmt.n(c.messages)} messages`)),
        h("ol", {class: "transcript", "aria-label": "Messages"}, c.thread.map((m) => h("li", {"data-from": m.sender},
          h("div", {class: "row"}, h("strong", {}, m.sender === "owner" ? "You" : party(m.sender)), " to ", party(m.to),
            h("small", {}, fmt.time(m.at))),
          h("div", {}, rich(m.text)), m.file ? h("small", {}, "File: ", m.file) : null)))];
    }, {label: "The thread"}));
  if (a === "owner" && /^\d+$/.test(b || "")) {
    view.append(card("Message", form({label: `Message agent ${b}`, submit: "Send",
      fields: [field(`To agent ${b}`, h("textarea", {name: "text", rows: 3, required: true}))],
      send: async (d, el) => {
        await post(`/v1/agents/${b}/tell`, {text: String(d.get("text"))});
        el.reset();
        return "Sent.";
      }})));
  }
}
