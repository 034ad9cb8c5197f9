// The first module the front page runs: async and with no imports, so it runs as soon as it is here,
// before the frame's modules. It starts what the opened screen needs, so that nothing waits for the
// frame to ask (bench/console.py): the plaza's state, the screen's first reads and its module, and, once
// the plaza has answered (this browser is the owner's), the live stream. api.js and live.js import this
// same module (one instance per page): the first read of each path takes the answer started here, and
// the live stream takes the socket opened here with what it has seen so far.

export const SUBPROTOCOL = "apz.events.v1";
//: An answer started here serves the first read of the same path within this long; after that, and
//: for every later read, the hub is asked again.
export const EARLY_FOR_MS = 5000;
//: The screens whose first draw starts here: the paths it reads, exactly as the screen asks for them
//: (through get(), the empty parts of a query left out). A screen not named here loads as it is opened.
export const FIRST_READS = {
  overview: ["/v1/overview", "/v1/nodes", "/v1/treasury/flows"],
  treasury: ["/v1/treasury/wallets", "/v1/treasury/journal?limit=50", "/v1/treasury/series?by=day",
    "/v1/treasury/flows", "/v1/treasury", "/v1/settings"],
};

const answers = new Map();
let first = null;

// A request to the hub: {ok, status, statusText, text}, or a rejection when the hub did not answer
// (api.js says so).
export function ask(path, {method = "GET", headers = {}, body} = {}) {
  return fetch(path, {method, body, credentials: "same-origin", headers: {Accept: "application/json", ...headers}})
    .then(async (r) => ({ok: r.ok, status: r.status, statusText: r.statusText, text: await r.text()}));
}

// The answer started here for this path, once, while it is fresh; else null.
export function takeEarly(path) {
  const e = answers.get(path);
  if (!e) return null;
  answers.delete(path);
  return performance.now() - e.at <= EARLY_FOR_MS ? e.answer : null;
}

// The socket opened here, once: live.js sets its handlers, then replay() hands them what it saw.
export function takeSocket() {
  const f = first;
  first = null;
  return f;
}

function start(path) {
  const answer = ask(path);
  answer.catch(() => null);  // a read that never comes is the reader's to report, not a fault here
  answers.set(path, {at: performance.now(), answer});
  return answer;
}

function openSocket() {
  const socket = new WebSocket(location.origin.replace(/^http/, "ws") + "/v1/ws", SUBPROTOCOL);
  const seen = [];
  for (const on of ["onopen", "onmessage", "onclose"]) socket[on] = (e) => seen.push([on, e]);
  first = {socket, replay: () => { for (const [on, e] of seen) if (socket[on]) socket[on](e); }};
}

performance.mark("apz:early");
const id = decodeURIComponent(location.hash.replace(/^#\/?/, "").split("/")[0] || "overview");
start("/v1/plaza").then((r) => { if (r.ok) openSocket(); }, () => null);
if (Object.hasOwn(FIRST_READS, id)) {
  for (const path of FIRST_READS[id]) start(path);
  const link = document.createElement("link");
  link.rel = "modulepreload";
  link.href = new URL(`./screens/${id}.js`, import.meta.url).href;
  document.head.append(link);
}
