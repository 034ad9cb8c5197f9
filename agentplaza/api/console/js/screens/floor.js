//# allFunctionsCalledOnLoad
// Floor: every agent drawn as a robot with its status (offline, idle, working, asleep); clicking one opens
// its page. The hub deals each agent its species when it first sees it (domain/floor.py: the fewest-used
// first; the orchestrator is always the rover, Treads), kept as an event, and /v1/agents says it; an agent
// from a log older than the deal is dealt here the same way, in CID order. The species are only a look.

import {get} from "../api.js";
import {badge, h} from "../ui.js";

//: The rover is the orchestrator's alone; the others are dealt to workers.
export const ORCHESTRATOR_SPECIES = "treads";
export const WORKER_SPECIES = ["biped", "hover", "spider", "boxy", "arm"];
const NAMES = {treads: "Treads, the rover", biped: "biped", hover: "hover drone", spider: "spider", boxy: "box bot", arm: "arm"};
//: Each species' shape, as SVG path data on a 64 × 64 grid.
const SHAPES = {
  treads: "M10 44h44v10H10zM16 24h32v20H16zM28 14h8v10h-8z",
  biped: "M20 10h24v22H20zM24 32h6v20h-6zM34 32h6v20h-6z",
  hover: "M14 26h36v14H14zM6 20h16v4H6zM42 20h16v4H42zM28 40h8v10h-8z",
  spider: "M22 22h20v16H22zM8 18l14 8v3L8 22zM56 18l-14 8v3l14-4zM8 46l14-8v3L8 50zM56 46l-14-8v3l14 9z",
  boxy: "M14 14h36v36H14zM22 22h6v6h-6zM36 22h6v6h-6zM22 38h20v4H22z",
  arm: "M10 50h20v6H10zM16 30h8v20h-8zM16 26l26-14 4 6-26 14z",
};

export function deal(agents) {
  const used = Object.fromEntries(WORKER_SPECIES.map((s) => [s, 0]));
  const out = new Map();
  for (const a of [...agents].sort((x, y) => x.cid - y.cid)) {
    if (a.role === "orchestrator") { out.set(a.cid, ORCHESTRATOR_SPECIES); continue; }
    const pick = WORKER_SPECIES.reduce((best, s) => (used[s] < used[best] ? s : best), WORKER_SPECIES[0]);
    used[pick] += 1;
    out.set(a.cid, pick);
  }
  return out;
}

function robot(species) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 64 64");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `a robot: ${NAMES[species]}`);
  const p = document.createElementNS(ns, "path");
  p.setAttribute("d", SHAPES[species]);
  p.setAttribute("fill", species === ORCHESTRATOR_SPECIES ? "#b35c00" : "#0b5fcc");
  svg.append(p);
  return svg;
}

export async function render(view, ctx) {
  view.append(ctx.live(["agent"], async () => {
    const {agents} = await get("/v1/agents");
    if (!agents.length) return h("p", {class: "empty"}, "The floor is empty. Spawn agents on the Agents screen.");
    const dealt = deal(agents);
    const species = (a) => (a.species in SHAPES ? a.species : dealt.get(a.cid));
    return h("div", {class: "floor"}, agents.map((a) => h("a", {class: `robot robot-${a.status}`, href: `#/agents/${a.cid}`},
    robot(species(a)), h("div", {}, a.name || `Agent ${a.cid}`), h("small", {}, a.role), h("div", {}, badge(a.status)))));
  }, {label: "The floor"}));
}
