//# allFunctionsCalledOnLoad
// The news channel: one WebSocket at /v1/ws, subprotocol apz.events.v1, read-only (the console never
// sends on it). Each message is {"event": family, "data": ...}; a listener names the families it shows
// and reloads them through the API. When the socket drops the console reconnects by itself: after one
// second, doubling the wait up to 30 seconds, and every listener reads the state again on reconnect.

import {SIGNED_OUT} from "./api.js";

//: The subprotocol of /v1/ws (early.js, which may open the first socket, names the same).
export const SUBPROTOCOL = "apz.events.v1";
export const RETRY_FIRST_MS = 1000;
export const RETRY_MAX_MS = 30000;
//: The hub closes a socket it refuses to sign in with 4401.
const CLOSE_UNAUTHORIZED = 4401;

const listeners = new Set();
const statusWatchers = new Set();
let socket = null;
let wait = RETRY_FIRST_MS;
let timer = null;
let everOpened = false;
export let state = "connecting";

function setState(s) {
  state = s;
  for (const fn of statusWatchers) fn(s);
}

export function onStatus(fn) {
  statusWatchers.add(fn);
  fn(state);
  return () => statusWatchers.delete(fn);
}

// families: an array of event families, or ["*"]; fn(message) is called for each matching event, and
// with null after a reconnect (the state may have moved while the socket was down).
export function listen(families, fn) {
  const entry = {families: new Set(families), fn};
  listeners.add(entry);
  return () => listeners.delete(entry);
}

// Signed out: the socket stops trying (the sign-in page reloads the console once signed in).
let stopped = false;
window.addEventListener(SIGNED_OUT, () => {
  stopped = true;
  clearTimeout(timer);
  if (socket) socket.close();
});

export function connect() {
  clearTimeout(timer);
  if (stopped) return;
  const url = location.origin.replace(/^http/, "ws") + "/v1/ws";
  setState(everOpened ? "reconnecting" : "connecting");
  // The first time: the socket early.js (the front page's first script) opened as the page opened.
  const first = window.apzEarly ? window.apzEarly.takeSocket() : null;
  socket = first ? first.socket : new WebSocket(url, SUBPROTOCOL);
  socket.onopen = () => {
    const again = everOpened;
    everOpened = true;
    wait = RETRY_FIRST_MS;
    setState("live");
    if (again) for (const l of listeners) l.fn(null);
  };
  socket.onmessage = (m) => {
    let msg;
    try {
      msg = JSON.parse(m.data);
    } catch (e) {
      return;
    }
    for (const l of listeners) {
      if (l.families.has("*") || l.families.has(msg.event)) l.fn(msg);
    }
  };
  socket.onclose = (e) => {
    socket = null;
    if (stopped) return;
    if (e.code === CLOSE_UNAUTHORIZED) {
      // The sign-in this socket opened with ended. The browser may hold a newer one already (the Nodes
      // screen signs in again with the token it rotated): ask the hub once before showing the sign-in page.
      fetch("/v1/hub", {credentials: "same-origin", headers: {Accept: "application/json"}}).then((r) => {
        if (r.ok) { connect(); return; }
        setState("signed out");
        window.dispatchEvent(new CustomEvent(SIGNED_OUT));
      }, () => { setState("offline"); timer = setTimeout(connect, wait); });
      return;
    }
    setState("offline");
    timer = setTimeout(connect, wait);
    wait = Math.min(wait * 2, RETRY_MAX_MS);
  };
  if (first) first.replay();  // its open, the messages and a close it saw before these handlers, in order
}
