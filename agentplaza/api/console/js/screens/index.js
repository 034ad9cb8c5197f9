//# allFunctionsCalledOnLoad
// Every screen of the console, in sidebar order. Adding a screen is one file in this folder and one line
// here: {id, title, group, load} for a built screen (its module exports render(view, ctx)), or
// {id, title, group, later} for an area the hub does not have yet (the screen says so in one line).
// A screen's first reads may be started as the page opens, before its module is here: early.js.
// Every console module starts with the line //# allFunctionsCalledOnLoad (V8's compile hint): its functions
// are compiled as the file is read, on a background thread, rather than each on the main thread the first
// time it is called while the screen draws (tests/test_console.py holds it; docs/console.md).

export const GROUPS = ["Plaza", "Social", "Lab", "Setup"];

export const SCREENS = [
  {id: "overview", title: "Overview", group: "Plaza", load: () => import("./overview.js")},
  {id: "floor", title: "Floor", group: "Plaza", load: () => import("./floor.js")},
  {id: "agents", title: "Agents", group: "Plaza", load: () => import("./agents.js")},
  {id: "tasks", title: "Tasks", group: "Plaza", load: () => import("./tasks.js")},
  {id: "approvals", title: "Approvals", group: "Plaza", load: () => import("./approvals.js")},
  {id: "treasury", title: "Treasury", group: "Plaza", load: () => import("./treasury.js")},
  {id: "projects", title: "Projects", group: "Plaza", load: () => import("./projects.js")},
  {id: "git", title: "Git", group: "Plaza", load: () => import("./git.js")},
  {id: "library", title: "Library", group: "Plaza", load: () => import("./library.js")},
  {id: "metrics", title: "Metrics", group: "Plaza", load: () => import("./metrics.js")},
  {id: "society", title: "Society", group: "Social", load: () => import("./society.js")},
  {id: "board", title: "Board", group: "Social", load: () => import("./board.js")},
  {id: "conversations", title: "Conversations", group: "Social", load: () => import("./conversations.js")},
  {id: "council", title: "Council", group: "Social", load: () => import("./council.js")},
  {id: "lab", title: "Lab", group: "Lab", later: "The Lab (the Foundry and Hugging Face) is not built in this hub yet."},
  {id: "rules", title: "Rules", group: "Setup", load: () => import("./rules.js")},
  {id: "models", title: "Models", group: "Setup", load: () => import("./models.js")},
  {id: "vault", title: "Vault", group: "Setup", load: () => import("./vault.js")},
  {id: "nodes", title: "Nodes", group: "Setup", load: () => import("./nodes.js")},
  {id: "tools", title: "Tools", group: "Setup", load: () => import("./tools.js")},
  {id: "mcp", title: "MCP", group: "Setup", load: () => import("./mcp.js")},
  {id: "egress", title: "Egress", group: "Setup", load: () => import("./egress.js")},
  {id: "e2b", title: "E2B API", group: "Setup", load: () => import("./e2b.js")},
  {id: "volumes", title: "Volumes", group: "Setup", load: () => import("./volumes.js")},
  {id: "machines", title: "Machines", group: "Plaza", load: () => import("./machines.js")},
];
