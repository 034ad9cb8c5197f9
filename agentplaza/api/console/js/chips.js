//# allFunctionsCalledOnLoad
// Links, files and previews: references in a transcript, a message or a title become chips (@name for an
// agent, #N for a task, plain links), each with a preview card on hover or keyboard focus. Images from
// this hub show inline, with a larger view on click (Escape closes it). An HTML report shows in a frame
// sandboxed without allow-same-origin: its scripts run in an opaque origin, with no access to the
// console, no form submission and no navigation of the page.

import {get} from "./api.js";
import {badge, h} from "./ui.js";

//: One pattern for the references the console knows, in the order tried at each place in a text.
const REFS = /(@[A-Za-z0-9][\w.-]{0,39})|(?:task )?#(\d{1,9})\b|(https?:\/\/[^\s<>"')\]]+)/g;
//: How long the pointer rests on a chip before its card opens.
const HOVER_MS = 250;
const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;

export function rich(text) {
  const out = h("span", {class: "rich"});
  const s = String(text ?? "");
  let at = 0;
  for (const m of s.matchAll(REFS)) {
    out.append(s.slice(at, m.index));
    at = m.index + m[0].length;
    if (m[1]) out.append(chip(m[1], "#/agents/" + encodeURIComponent(m[1].slice(1)), () => agentCard(m[1].slice(1))));
    else if (m[2]) out.append(chip(m[0], "#/tasks/t" + m[2], () => taskCard("t" + m[2])));
    else out.append(linkChip(m[3]));
  }
  out.append(s.slice(at));
  return out;
}

function linkChip(url) {
  let u;
  try {
    u = new URL(url);
  } catch (e) {
    return url;
  }
  if (u.origin === location.origin && IMAGE.test(u.pathname)) return inlineImage(u.href, u.pathname);
  const label = u.host + (u.pathname.length > 1 ? u.pathname.slice(0, 40) : "");
  return chip(label, u.href, async () => ({kind: "Link", title: u.host, excerpt: u.href}), true);
}

function chip(label, href, preview, external = false) {
  const a = h("a", {class: "chip", href, rel: external ? "noopener noreferrer" : null,
                     target: external ? "_blank" : null}, label);
  let card = null;
  let timer = null;
  const open = async () => {
    if (card) return;
    card = h("div", {class: "preview", role: "tooltip", id: "pv-" + Math.random().toString(36).slice(2, 9)}, "…");
    a.setAttribute("aria-describedby", card.id);
    document.body.append(card);
    const r = a.getBoundingClientRect();
    card.style.left = `${Math.max(8, r.left + scrollX)}px`;
    card.style.top = `${r.bottom + scrollY + 6}px`;
    const shown = card;
    try {
      const p = await preview();
      if (shown !== card) return;
      shown.replaceChildren(h("small", {}, p.kind), h("strong", {}, " ", p.title), p.state ? [" ", badge(p.state)] : null,
        p.author ? h("div", {}, "by ", p.author) : null, p.excerpt ? h("div", {}, p.excerpt) : null);
    } catch (err) {
      if (shown === card) shown.replaceChildren(h("small", {}, "No preview: ", err.message));
    }
  };
  const close = () => {
    clearTimeout(timer);
    if (card) card.remove();
    card = null;
    a.removeAttribute("aria-describedby");
  };
  a.addEventListener("mouseenter", () => { timer = setTimeout(open, HOVER_MS); });
  a.addEventListener("mouseleave", close);
  a.addEventListener("focus", open);
  a.addEventListener("blur", close);
  a.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
  return a;
}

async function taskCard(number) {
  const t = await get(`/v1/tasks/${number}`);
  return {kind: "Task " + t.id, title: t.title, state: t.state,
          excerpt: t.worker ? `Assigned to ${t.worker}` : "Not assigned"};
}

async function agentCard(name) {
  const {agents} = await get("/v1/agents");
  const a = agents.find((x) => String(x.cid) === name || (x.name || "").toLowerCase() === name.toLowerCase());
  if (!a) return {kind: "Agent", title: "@" + name, excerpt: "No such agent on this plaza."};
  return {kind: "Agent " + a.cid, title: a.name || `#${a.cid}`, state: a.status, excerpt: `${a.role} on ${a.node || "no node"}`};
}

export function inlineImage(src, alt) {
  const img = h("img", {class: "inline-image", src, alt: alt || "an image", tabindex: "0"});
  const big = () => {
    const d = h("dialog", {class: "lightbox", "aria-label": "The image, larger"},
      h("img", {src, alt: alt || "an image"}), h("form", {method: "dialog"}, h("button", {}, "Close")));
    d.addEventListener("close", () => d.remove());
    document.body.append(d);
    d.showModal();  // Escape closes a modal dialog
  };
  img.addEventListener("click", big);
  img.addEventListener("keydown", (e) => { if (e.key === "Enter") big(); });
  return img;
}

// An HTML report the hub serves at src (same origin), framed with scripts on but no same-origin access.
export function reportFrame(src, title) {
  return h("iframe", {class: "report", src, title: title || "A report", sandbox: "allow-scripts",
                      referrerpolicy: "no-referrer", loading: "lazy"});
}
