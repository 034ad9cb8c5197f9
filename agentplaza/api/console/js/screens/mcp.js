//# allFunctionsCalledOnLoad
// MCP: two tabs. "MCP servers" (servers the plaza runs for its agents) is not built on this hub yet;
// "This hub as a server" is: the switch (on for this machine, on for others too, off), the settings
// (secure or open mode, the open scope, more browser origins), the tokens (made here and shown once, never
// again; revoke), the tools a client can see, the call log and the govern tools' recommendations.

import {del, get, patch, post} from "../api.js";
import {action, badge, card, field, fill, fmt, form, h, pairs, select, table} from "../ui.js";

const SCOPES = ["observe", "operate", "govern"];
const FAMILIES = ["hubmcp", "mcptoken", "mcpcall", "mcprecommendation"];
//: The most calls the log loads.
const CALLS = 100;
const TABS = [["hub", "This hub as a server"], ["servers", "MCP servers"]];

export async function render(view, ctx) {
  // Both panels are made once and shown in turn, so a tab's live sections are not made again.
  const panels = {
    hub: h("div", {role: "tabpanel", id: "mcp-panel-hub", "aria-labelledby": "mcp-tab-hub"}, hubServer(ctx)),
    servers: h("div", {role: "tabpanel", id: "mcp-panel-servers", "aria-labelledby": "mcp-tab-servers", hidden: true},
      h("p", {class: "later-note"}, "MCP servers for agents (the catalog, Add server, credentials from the vault, " +
        "status and logs) are not built in this hub yet.")),
  };
  const tabs = h("div", {class: "tabs", role: "tablist", "aria-label": "MCP"});
  const open = (id) => {
    fill(tabs, TABS.map(([t, title]) => h("button", {type: "button", role: "tab", id: `mcp-tab-${t}`,
      "aria-selected": String(t === id), "aria-controls": `mcp-panel-${t}`, onclick: () => open(t)}, title)));
    for (const [t, panel] of Object.entries(panels)) panel.hidden = t !== id;
  };
  view.append(tabs, panels.hub, panels.servers);
  open("hub");
}

function hubServer(ctx) {
  const made = h("div", {"aria-live": "polite"});
  const tool = h("input", {id: "mcp-call-tool", name: "tool", size: 16, autocomplete: "off", placeholder: "every tool"});
  let calls;
  const callFilter = h("form", {class: "row", "aria-label": "Filter the calls"},
    h("label", {for: "mcp-call-tool"}, "Tool"), tool, h("button", {type: "submit"}, "Show"));
  callFilter.addEventListener("submit", (e) => { e.preventDefault(); calls.reload(); });
  calls = ctx.live(["mcpcall", "mcptoken"], async () => {
    const list = (await get("/v1/hub-mcp/calls", {tool: tool.value.trim() || undefined, limit: CALLS})).calls;
    return table([{label: "When", value: (c) => fmt.time(c.at)}, {label: "Caller", value: (c) => c.caller},
      {label: "Via", value: (c) => c.via}, {label: "Tool", value: (c) => c.tool},
      {label: "Outcome", value: (c) => [badge(c.outcome, c.outcome === "ok" ? "approved" : "denied"), c.code ? ` ${c.code}` : ""]},
      {label: "Time", value: (c) => `${fmt.n(c.ms)} ms`}], list, {label: "MCP calls", empty: "No calls yet."});
  }, {label: "The calls"});
  return [
    ctx.live(["hubmcp"], async () => {
      const s = await get("/v1/hub-mcp");
      const mode = select("mode", [["secure", "Secure (every request carries a token)"], ["open", "Open (no token runs at the open scope)"]], s.auth.mode);
      const scope = select("open_scope", SCOPES, s.auth.open_scope);
      const origins = h("textarea", {name: "origins", rows: 2}, s.origins.added.join("\n"));
      return [
        card("The server", h("p", {}, badge(s.enabled ? "on" : "off", s.enabled ? "running" : "offline"), " ", s.state),
          s.warnings.map((w) => h("p", {class: "warning", role: "note"}, w)),
          pairs({Address: s.url, Bind: s.bind, Mode: s.auth.mode, "Open scope": s.auth.open_scope,
            "The hub's own origins": s.origins.own.join(", ") || "—", "Origins added": s.origins.added.join(", ") || "—",
            "Rate a minute": Object.entries(s.rate_per_minute).map(([k, v]) => `${k} ${v}`).join(", ")}),
          h("div", {class: "actions"}, s.enabled
            ? action("Turn off", () => post("/v1/hub-mcp/disable", {}).then(() => "Off."), {confirm: {title: "Turn the MCP server off?",
              message: "Nothing answers at /mcp until you turn it on again.", yes: "Turn off", danger: true}})
            : action("Turn on", () => post("/v1/hub-mcp/enable", {}).then(() => "On, for this machine."), {kind: "primary"}),
          action(s.bind === "remote" ? "Local only" : "Answer other machines too",
            () => post("/v1/hub-mcp/enable", {remote: s.bind !== "remote"}).then(() => "Done."),
            {label: s.bind === "remote" ? "Local only: answer this machine only" : "Answer other machines too (remote)"})),
          h("h3", {}, "Connect Claude Code"), h("pre", {}, s.claude_code)),
        card("Settings", form({label: "MCP settings", submit: "Save settings",
          fields: [field("Mode", mode), field("Open scope", scope, "What a request with no token may do in open mode."),
            field("More browser origins", origins, "One a line; the hub's own are always allowed.")],
          send: async (d) => {
            await patch("/v1/hub-mcp/settings", {mode: d.get("mode"), open_scope: d.get("open_scope"),
              origins: String(d.get("origins") || "").split(/\s+/).filter(Boolean)});
            return "Saved.";
          }})),
      ];
    }, {label: "The MCP server"}),
    card("Tokens", form({label: "Make a token", submit: "Make token",
      fields: [field("Name", h("input", {name: "name", required: true, autocomplete: "off"})),
        field("Scope", select("scope", SCOPES, "observe")),
        field("Tools (optional)", h("input", {name: "tools", autocomplete: "off"}), "Comma-separated; none means every tool of the scope."),
        field("Expires (optional)", h("input", {name: "expires", autocomplete: "off", placeholder: "30d"}))],
      send: async (d, el) => {
        const body = {name: String(d.get("name")), scope: String(d.get("scope")),
          tools: String(d.get("tools") || "").split(",").map((t) => t.trim()).filter(Boolean)};
        if (d.get("expires")) body.expires = String(d.get("expires"));
        const t = await post("/v1/hub-mcp/tokens", body);
        el.reset();
        fill(made, h("div", {class: "card shown-once", role: "region", "aria-label": "The new token"},
          h("p", {}, h("strong", {}, `The token for ${t.name}. `), "It is shown this once: copy it now."),
          h("pre", {"data-testid": "mcp-token"}, t.token),
          h("button", {type: "button", onclick: () => fill(made)}, "I copied it")));
        return `Made ${t.name}.`;
      }}), made,
    ctx.live(["mcptoken", "mcpcall"], async () => {
      const {tokens} = await get("/v1/hub-mcp/tokens");
      return table([{label: "Name", value: (t) => t.name, sort: (t) => t.name}, {label: "Scope", value: (t) => t.scope},
        {label: "Tools", value: (t) => (t.tools.length ? t.tools.join(", ") : "every tool of its scope")},
        {label: "Expires", value: (t) => fmt.time(t.expires_at)}, {label: "Made", value: (t) => fmt.time(t.created_at), sort: (t) => t.created_at},
        {label: "Calls", value: (t) => fmt.n(t.calls), sort: (t) => t.calls}, {label: "Last call", value: (t) => fmt.time(t.last_call_at)},
        {label: "State", value: (t) => (t.revoked_at ? badge("revoked", "denied") : badge("active", "approved"))},
        {label: "", nosort: true, value: (t) => (t.revoked_at ? "" : action("Revoke", () => del(`/v1/hub-mcp/tokens/${t.id}`).then(() => "Revoked."),
          {label: `Revoke ${t.name}`, confirm: {title: `Revoke the token ${t.name}?`, danger: true, yes: "Revoke",
            message: "A client using it is refused from its next call."}}))}],
      tokens, {sortable: true, label: "MCP tokens", empty: "No tokens yet."});
    }, {label: "The tokens"})),
    ctx.live(["hubmcp"], async () => editors((await get("/v1/hub-mcp")).acp), {label: "The editors"}),
    card("Calls", callFilter, calls),
    ctx.live(["mcprecommendation"], async () => {
      const {recommendations} = await get("/v1/hub-mcp/recommendations");
      return card("Recommendations", h("p", {}, h("small", {}, "What govern tokens recommended on pending approvals; they decide nothing.")),
        table([{label: "When", value: (r) => fmt.time(r.at)}, {label: "Approval", value: (r) => h("a", {href: "#/approvals"}, r.approval)},
          {label: "Verdict", value: (r) => r.verdict}, {label: "Note", value: (r) => r.note}, {label: "By", value: (r) => r.caller}],
        recommendations, {label: "Recommendations", empty: "No recommendations."}));
    }, {label: "The recommendations"}),
    ctx.live([], async () => {
      const {tools} = await get("/v1/hub-mcp/tools");
      return card("The tools a client sees", table([{label: "Tool", value: (t) => h("code", {}, t.name)}, {label: "Scope", value: (t) => t.scope},
        {label: "Changes the plaza", value: (t) => (t.changes ? "yes" : "no")}, {label: "What it does", value: (t) => t.description}],
      tools, {label: "MCP tools"}));
    }, {label: "The tool list"}),
  ];
}

//: The Editors (ACP) switches: each PATCHes one setting of /v1/hub-mcp/acp.
const ACP_SWITCHES = [
  ["acp_enabled", "Editors (ACP)", "Editors such as Zed drive agents over /acp with an operate or govern token."],
  ["acp_write_back", "Offer to apply an agent's pull request to the editor's project", "Off: the editor only sees the diff."],
  ["acp_v2", "Speak the ACP v2 draft", "Only with editors that ask for version 2."],
];

function editors(acp) {
  return card("Editors (ACP)",
    pairs(Object.fromEntries(ACP_SWITCHES.map(([key, title]) => [title, acp[key] ? "on" : "off"]))),
    ACP_SWITCHES.map(([key, title, help]) => h("div", {class: "actions"},
      action(acp[key] ? `Turn off: ${title}` : `Turn on: ${title}`, () => patch("/v1/hub-mcp/acp", {[key]: !acp[key]}).then(() => "Done.")),
      h("small", {}, ` ${help}`))),
    pairs({"The editors' address": acp.url}), h("h3", {}, "Connect Zed"), h("pre", {}, acp.zed));
}
