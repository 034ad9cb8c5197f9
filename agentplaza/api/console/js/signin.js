//# allFunctionsCalledOnLoad
// The sign-in page, for a browser on another machine: the owner token makes a session cookie
// (POST /v1/auth/session; HttpOnly, Secure, SameSite=Strict, 12 hours). The console never keeps the token:
// not in local storage, not in a variable after the request.

import {post} from "./api.js";
import {field, fill, form, h} from "./ui.js";

export function signInPage(root) {
  const token = h("input", {name: "token", type: "password", autocomplete: "current-password", required: true});
  fill(root, h("main", {class: "signin", id: "main"},
    h("h1", {}, "Sign in to AgentPlaza"),
    h("p", {}, "This browser is not on the hub's machine. Paste the owner token: apid printed it at its first " +
      "start, and it is in the file owner-token in the hub's state folder. A sign-in lasts 12 hours."),
    form({label: "Sign in", submit: "Sign in", fields: [field("Owner token", token)],
      send: async (data, el) => {
        await post("/v1/auth/session", {token: String(data.get("token"))});
        el.reset();
        location.reload();
        return "Signed in.";
      }})));
  token.focus();
}
