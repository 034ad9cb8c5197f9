// The one way the console reads and changes the plaza: JSON requests to the hub's /v1 API, the same
// requests the command line makes. A refusal is {"error": {"code", "message"}}; it becomes an ApiError.

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

export async function api(method, path, body) {
  const init = {method, credentials: "same-origin", headers: {Accept: "application/json"}};
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "unreachable", "the hub did not answer; is apid running?");
  }
  const text = await r.text();
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

export const get = (path, query) => api("GET", query ? path + "?" + new URLSearchParams(clean(query)) : path);
export const post = (path, body = {}) => api("POST", path, body);
export const put = (path, body = {}) => api("PUT", path, body);
export const patch = (path, body = {}) => api("PATCH", path, body);
export const del = (path) => api("DELETE", path);

function clean(query) {
  return Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== ""));
}
