// The first script the front page runs: a classic script in the head, neither async nor a module, so the
// parser runs it the moment it is here, before the page's first layout and paint and before any module.
// (As an async module it ran only after the page's first paint: 30 to 120 ms later on a busy machine,
// bench/console.py.) It starts what the opened screen needs, so that nothing waits for the frame to ask:
// the plaza's state, the screen's first reads and its module, and, once the plaza has answered (this
// browser is the owner's), the live stream. It hands them over through one global, apzEarly: api.js
// gives the first read of each path the answer started here, and live.js takes the socket opened here
// with what it has seen so far. Without it (the script failed to load) the console reads as usual.

(() => {
  //: The live stream's subprotocol (live.js's SUBPROTOCOL: tests/test_console.py holds the two alike).
  const SUBPROTOCOL = "apz.events.v1";
  //: An answer started here serves the first read of the same path within this long; after that, and
  //: for every later read, the hub is asked again.
  const EARLY_FOR_MS = 5000;
  //: The screens whose first draw starts here: the paths it reads, exactly as the screen asks for them
  //: (through get(), the empty parts of a query left out). A screen not named here loads as it is opened.
  const FIRST_READS = {
    overview: ["/v1/overview", "/v1/nodes", "/v1/treasury/flows"],
    treasury: ["/v1/treasury/wallets", "/v1/treasury/journal?limit=25", "/v1/treasury/series?by=day",
      "/v1/treasury/flows", "/v1/treasury", "/v1/settings"],
  };

  const answers = new Map();
  let first = null;

  // A request to the hub as api.js makes it: {ok, status, statusText, text}, or a rejection when the hub
  // did not answer (api.js says so).
  function ask(path) {
    return fetch(path, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(async (r) => ({ok: r.ok, status: r.status, statusText: r.statusText, text: await r.text()}));
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

  window.apzEarly = Object.freeze({
    // The answer started here for this path, once, while it is fresh; else null.
    take(path) {
      const e = answers.get(path);
      if (!e) return null;
      answers.delete(path);
      return performance.now() - e.at <= EARLY_FOR_MS ? e.answer : null;
    },
    // The socket opened here, once: live.js sets its handlers, then replay() hands them what it saw.
    takeSocket() {
      const f = first;
      first = null;
      return f;
    },
  });

  performance.mark("apz:early");
  const id = decodeURIComponent(location.hash.replace(/^#\/?/, "").split("/")[0] || "overview");
  start("/v1/plaza").then((r) => { if (r.ok) openSocket(); }, () => null);
  if (Object.hasOwn(FIRST_READS, id)) {
    for (const path of FIRST_READS[id]) start(path);
    // The screen's module is fetched, compiled and run now, beside the frame's, rather than once the
    // frame asks for it: the frame's import() then finds it ready (one module map, one instance).
    import(new URL(`./screens/${id}.js`, document.currentScript.src).href).catch(() => null);
  }
})();
