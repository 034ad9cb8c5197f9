//# allFunctionsCalledOnLoad
// The one way the console reads and changes the plaza: JSON requests to the hub's /v1 API, the same
// requests the command line makes. A refusal is {"error": {"code", "message"}}; it becomes an ApiError.

//: The first read of a path may take the answer early.js (the front page's first script) started for it.
const takeEarly = (path) => (window.apzEarly ? window.apzEarly.take(path) : null);

// A request to the hub: {ok, status, statusText, text}, or a rejection when the hub did not answer.
function ask(path, {method = "GET", headers = {}, body} = {}) {
  return fetch(path, {method, body, credentials: "same-origin", headers: {Accept: "application/json", ...headers}})
    .then(async (r) => ({ok: r.ok, status: r.status, statusText: r.statusText, text: await r.text()}));
}

export class ApiError extends Error {
  constructor(status, code, message, detail = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;  // the refusal's other fields (a law's compile error names its line and column)
  }
}

//: Fired on window when the hub answers 401: the frame shows the sign-in page.
export const SIGNED_OUT = "apz:signed-out";

// A read takes the answer early.js started for its path as the page opened, if there is one.
function send(method, path, body) {
  if (method === "GET" && body === undefined) return takeEarly(path) || ask(path);
  if (body === undefined) return ask(path, {method});
  return ask(path, {method, body: JSON.stringify(body), headers: {"Content-Type": "application/json"}});
}

export async function api(method, path, body) {
  let r;
  try {
    r = await send(method, path, body);
  } catch (e) {
    throw new ApiError(0, "unreachable", "the hub did not answer; is apid running?");
  }
  const text = r.text;
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = null;
  }
  if (!r.ok) {
    const err = (data && data.error) || {code: "http_" + r.status, message: text.slice(0, 200) || r.statusText};
    if (r.status === 401 && !path.startsWith("/v1/auth/")) window.dispatchEvent(new CustomEvent(SIGNED_OUT));
    throw new ApiError(r.status, err.code, err.message, err);
  }
  return data;
}

// A path with its query, as the hub is asked for it: the empty parts left out (so an early read of
// "/v1/treasury/flows" is the same path as get("/v1/treasury/flows", {from: undefined})).
export function address(path, query) {
  const q = query ? new URLSearchParams(clean(query)).toString() : "";
  return q ? path + "?" + q : path;
}

export const get = (path, query) => api("GET", address(path, query));
export const post = (path, body = {}) => api("POST", path, body);
export const put = (path, body = {}) => api("PUT", path, body);
export const patch = (path, body = {}) => api("PATCH", path, body);
export const del = (path) => api("DELETE", path);

function clean(query) {
  return Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== ""));
}
