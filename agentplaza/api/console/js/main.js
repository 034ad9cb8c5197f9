//# allFunctionsCalledOnLoad
// The console starts here (early.js, which the front page runs first, has started the opened screen's
// reads). The frame and the screen start at once; the first answer of 401 (the plaza's state or a
// screen's data) means this browser is not the owner's: the sign-in page takes the frame's place. The
// live stream opens once the hub has answered the plaza's state (with the socket early.js opened then).
// The hub serves this file with every module it imports written into it (agentplaza/api/console_bundle.py):
// one file to read and compile rather than seven; the screens, which import api.js and ui.js, are served
// importing them from this file, so the frame and the screens share one instance of each.

import {SIGNED_OUT} from "./api.js";
import {buildFrame} from "./frame.js";
import {connect} from "./live.js";
import {signInPage} from "./signin.js";

// The front page runs this module async: it starts as soon as its imports are here rather than after
// the page's parsing and first paint (bench/console.py: paired runs read a usable screen 10 to 15% sooner
// in three sets of four, within the noise in the fourth); the page's #app is there by then, or it waits.
function start() {
  performance.mark("apz:main");
  const root = document.getElementById("app");
  window.addEventListener(SIGNED_OUT, () => signInPage(root), {once: true});
  buildFrame(root).then((answered) => { if (answered) connect(); });
}
if (document.getElementById("app")) start();
else document.addEventListener("DOMContentLoaded", start, {once: true});
