// The front page runs this first, on its own: it starts fetching the module of the screen the address
// names while the frame's own modules still load, so the screen does not wait for the frame to ask
// (bench/console.py). The frame's import() of the same module then finds it fetched.

import {SCREENS} from "./screens/index.js";

const id = decodeURIComponent(location.hash.replace(/^#\/?/, "").split("/")[0] || "overview");
const screen = SCREENS.find((s) => s.id === id);
if (screen && screen.load) screen.load().catch(() => null);
