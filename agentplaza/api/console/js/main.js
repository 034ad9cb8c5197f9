// The console starts here: is the caller the owner (loopback, a session cookie)? Then the frame and the
// live stream; else the sign-in page.

import {ApiError, SIGNED_OUT, get} from "./api.js";
import {buildFrame} from "./frame.js";
import {connect} from "./live.js";
import {signInPage} from "./signin.js";
import {errorBox, fill} from "./ui.js";

const root = document.getElementById("app");

async function start() {
  try {
    await get("/v1/hub");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      signInPage(root);
      return;
    }
    fill(root, errorBox(err));
    return;
  }
  window.addEventListener(SIGNED_OUT, () => signInPage(root), {once: true});
  buildFrame(root);
  connect();
}

start();
