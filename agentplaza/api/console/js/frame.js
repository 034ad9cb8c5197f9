//# allFunctionsCalledOnLoad
// The frame around every screen: the sidebar in the guide's four groups, the top bar with the connection
// indicator and STOP ALL / RESUME, and the banner while the plaza is held (who, since when, why).
// A screen module exports render(view, ctx); ctx.live(families, load) makes a section that reloads
// whenever an event of those families arrives (and after a reconnect), so it follows the plaza live.

import {SIGNED_OUT, get, post} from "./api.js";
import {listen, onStatus} from "./live.js";
import {GROUPS, SCREENS} from "./screens/index.js";
import {action, errorBox, fill, fmt, h, keepNotes, keepTyped} from "./ui.js";

//: Events that arrive together reload a section once, this long after the first.
export const COALESCE_MS = 120;
//: The frame goes into the page once the plaza's state and the first screen's sections have drawn their
//: first answers (early.js has them on their way), or after this long at most: the page is laid out and
//: painted once, whole, rather than drawn empty and then again section by section, and the screen's
//: module is not kept waiting behind the empty frame's layout (bench/console.py). A slower hub shows the
//: frame with its sections still loading.
export const FIRST_DRAW_WAIT_MS = 400;

let plaza = {held: false};
const heldWatchers = new Set();
let stopSwitch, banner, main, nav;
let teardown = [];

function screenOf(hash) {
  const [id = "overview", ...rest] = hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  return Object.assign({}, SCREENS.find((s) => s.id === id) || SCREENS[0], {rest});
}

export function buildFrame(root) {
  const conn = h("span", {class: "conn", role: "status", "aria-live": "polite"});
  onStatus((s) => {
    conn.className = "conn conn-" + s.replace(" ", "-");
    conn.textContent = s === "live" ? "Live" : s[0].toUpperCase() + s.slice(1);
  });
  stopSwitch = h("span", {class: "switch"});
  banner = h("div", {class: "held-banner", role: "alert", hidden: true});
  nav = h("nav", {class: "sidebar", "aria-label": "Screens"}, GROUPS.map((g) => h("div", {class: "group"},
    h("h2", {}, g),
    h("ul", {}, SCREENS.filter((s) => s.group === g).map((s) => h("li", {},
      h("a", {href: "#/" + s.id, "data-screen": s.id, class: s.later ? "later" : null}, s.title)))))));
  main = h("main", {id: "main", tabindex: "-1"});
  const signOut = h("button", {type: "button", class: "quiet", onclick: async () => {
    try { await fetch("/v1/auth/session", {method: "DELETE", credentials: "same-origin"}); } finally {
      location.reload();
    }
  }}, "Sign out");
  const frame = [
    h("a", {class: "skip", href: "#main", onclick: (e) => { e.preventDefault(); main.focus(); }}, "Skip to the screen"),
    h("header", {class: "topbar"}, h("span", {class: "brand"}, "AgentPlaza"), conn, h("span", {class: "grow"}),
      stopSwitch, signOut),
    banner,
    h("div", {class: "body"}, nav, main)];
  let signedOut = false;  // the sign-in page (main.js) takes the frame's place: it never goes in
  window.addEventListener(SIGNED_OUT, () => { signedOut = true; }, {once: true});
  listen(["plaza"], () => refreshPlaza());
  listen(["*"], (m) => { if (m === null) refreshPlaza(); });
  window.addEventListener("hashchange", route);
  const answered = refreshPlaza();
  const drawn = Promise.all([answered, route()]);
  Promise.race([drawn, new Promise((done) => setTimeout(done, FIRST_DRAW_WAIT_MS))])
    .then(() => {
      if (signedOut) return;
      fill(root, ...frame);
      performance.mark("apz:frame-in");
    });
  return answered;
}

export function onHeld(fn) {
  heldWatchers.add(fn);
  return () => heldWatchers.delete(fn);
}

// The plaza's state, read again; true when the hub answered it.
export async function refreshPlaza() {
  try {
    plaza = await get("/v1/plaza");
  } catch (err) {
    fill(stopSwitch, errorBox(err));
    return false;
  }
  drawSwitch();
  for (const fn of heldWatchers) fn(plaza);
  return true;
}

function drawSwitch() {
  if (plaza.held) {
    banner.hidden = false;
    fill(banner, h("strong", {}, "The plaza is held. "),
      `STOP ALL by ${plaza.by || "someone"} since ${fmt.time(plaza.since)}`,
      plaza.reason ? ` — “${plaza.reason}”` : "", ". Nothing new starts until you resume.");
    fill(stopSwitch, action("RESUME", async () => {
      plaza = await post("/v1/plaza/resume", {});
      drawSwitch();
    }, {kind: "resume", confirm: {title: "Resume the plaza?", message: "Queued work starts again.", yes: "Resume"}}));
  } else {
    banner.hidden = true;
    fill(stopSwitch, action("STOP ALL", async (reason) => {
      plaza = await post("/v1/plaza/stop", reason ? {reason} : {});
      drawSwitch();
    }, {kind: "danger stop-all", confirm: {
      title: "STOP ALL?", danger: true, yes: "STOP ALL", reason: "Reason",
      message: "Cancels every agent's running work and holds the plaza. The VMs stay running and their queues are kept.",
    }}));
  }
}

// Draws the screen the address names; resolves once each of its live sections has drawn once.
async function route() {
  for (const fn of teardown) fn();
  teardown = [];
  const screen = screenOf(location.hash);
  const rest = screen.rest;
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.screen === screen.id) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `${screen.title} · AgentPlaza`;
  const view = h("div", {class: "screen", "data-screen": screen.id});
  fill(main, h("h1", {}, screen.title), view);
  if (screen.later) {
    fill(view, h("p", {class: "later-note"}, screen.later));
    return;
  }
  const sections = [];  // each live section's first draw, as the screen makes them
  const ctx = {params: rest, onHeld: (fn) => { teardown.push(onHeld(fn)); fn(plaza); }, plaza: () => plaza,
    live: (...args) => { const el = live(...args); sections.push(el.drawn); return el; }};
  try {
    performance.mark("apz:route");
    const mod = await screen.load();
    performance.mark("apz:screen-module");
    await mod.render(view, ctx);
    prefetchScreens();
  } catch (err) {
    fill(view, errorBox(err));
  }
  await Promise.all(sections);
}

// The other screens' modules, fetched once the browser is idle a while after the first screen started:
// the front page preloads only the frame's own modules, so the screen the owner opened does not wait
// behind twenty others (bench/console.py), and the next screen opened is already here.
//: How long after the first screen's start the others are fetched (its own answers come first).
const PREFETCH_AFTER_MS = 2000;
let prefetched = false;
function prefetchScreens() {
  if (prefetched) return;
  prefetched = true;
  const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 0));
  setTimeout(() => idle(() => { for (const s of SCREENS) if (s.load) s.load().catch(() => null); }, {timeout: 5000}),
    PREFETCH_AFTER_MS);
}

// A section of a screen that reloads when an event of one of these families arrives.
function live(families, load, {tag = "section", label} = {}) {
  const el = h(tag, {class: "live", "aria-label": label, "aria-busy": "true"});
  let pending = null;
  let running = false;
  let again = false;
  const run = async () => {
    pending = null;
    if (running) { again = true; return; }
    running = true;
    try {
      const out = await load(el);
      if (out !== undefined) {
        const keep = keepNotes(el);  // a form's or a button's message stays (ui.js)
        const typing = keepTyped(el);  // and what the owner typed into its forms, and the caret (ui.js)
        fill(el, out);
        keep(el);
        typing(el);
      }
    } catch (err) {
      fill(el, errorBox(err));
    } finally {
      el.setAttribute("aria-busy", "false");
      performance.mark("apz:drawn " + (label || families.join(",")));
      running = false;
      if (again) { again = false; run(); }
    }
  };
  el.reload = run;
  teardown.push(listen(families, () => { if (!pending) pending = setTimeout(run, COALESCE_MS); }));
  teardown.push(() => clearTimeout(pending));
  el.drawn = run();  // settles (never rejects) once the section has drawn its first answer or refusal
  return el;
}
