//# allFunctionsCalledOnLoad
// Tools: the tool library and the discoveries.
//
// The tool library: the programs agents packaged as tools. Each named tool with its versions: a new
// version is private to its author until the owner approves it here (its approval of kind tool_version,
// the same one the Approvals screen lists); an approved version is offered to every agent as x_NAME and
// runs inside the calling agent's own VM. The program of each version can be read before deciding
// (served as plain text, never run by the browser).
//
// The discoveries agents shared with plaza_toolbox_share ("a tool, library, service, API or technique
// that an agent tried on the internet and found useful"), the most endorsed first and a flagged one last
// and marked; the owner flags one or removes it (POST /v1/toolbox/{id}/flag, DELETE /v1/toolbox/{id}).
// "A discovery is information, not a way to call a service."

import {del, get, post} from "../api.js";
import {action, badge, card, fmt, h, pairs, table} from "../ui.js";
import {rich} from "../chips.js";

//: A program shows at most this many characters on the screen.
const PROGRAM_CHARS = 20000;

const program = (name, v) => `/v1/tools/${encodeURIComponent(name)}/versions/${v}/program`;

function programView(name, v) {
  const pre = h("pre", {class: "library-text", "aria-label": `Program of x_${name} version ${v.version}`}, "…");
  fetch(program(name, v.version), {credentials: "same-origin"})
    .then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.statusText))))
    .then((t) => { pre.textContent = t.length > PROGRAM_CHARS ? t.slice(0, PROGRAM_CHARS) + "\n…" : t; })
    .catch(() => { pre.textContent = "The program did not load."; });
  return pre;
}

function versionView(name, v) {
  const decide = v.status === "pending" ? h("div", {class: "actions"},
    action("Approve", (reason) => post(`${program(name, v.version).replace(/\/program$/, "")}/approve`, reason ? {reason} : {})
      .then(() => "Approved."), {kind: "primary", label: `Approve x_${name} version ${v.version}`,
      confirm: {title: `Approve x_${name} version ${v.version}?`, message: "Every agent is offered it, and it runs in their own VMs.",
        reason: "Reason (optional)", yes: "Approve"}}),
    action("Reject", (reason) => post(`${program(name, v.version).replace(/\/program$/, "")}/reject`, reason ? {reason} : {})
      .then(() => "Rejected."), {label: `Reject x_${name} version ${v.version}`,
      confirm: {title: `Reject x_${name} version ${v.version}?`, message: "It is offered to nobody.", reason: "Reason (optional)",
        yes: "Reject", danger: true}})) : null;
  return h("article", {class: "tool-version", "data-version": `${name}:${v.version}`},
    h("h3", {}, `Version ${v.version} `, badge(v.status)),
    h("p", {}, rich(v.description)),
    pairs({"Packaged by": `@${v.author}`, Packaged: fmt.time(v.packaged_at), File: v.filename, Size: `${fmt.n(v.size)} B`,
      SHA256: v.sha256, Approval: h("a", {href: "#/approvals"}, v.approval),
      ...(v.decided_at ? {Decided: fmt.time(v.decided_at)} : {})}),
    h("details", {}, h("summary", {}, "The program"), programView(name, v)),
    decide);
}

//: "The toolbox keeps at most 500 entries."
const MAX_ENTRIES = 500;
//: Only a web address becomes a link (the hub refuses any other; the screen checks again).
const WEB = /^https?:\/\//i;

function link(url) {
  return WEB.test(url) ? h("a", {href: url, rel: "noopener noreferrer nofollow", referrerpolicy: "no-referrer"}, url) : url;
}

export async function render(view, ctx) {
  const list = ctx.live(["librarytool", "approvals"], async () => {
    const {tools} = await get("/v1/tools");
    if (!tools.length) return h("p", {class: "empty"}, "No agent has packaged a tool yet.");
    const rows = tools.map((t) => ({...t, pending: t.pending.length ? t.pending.join(", ") : "none",
      approved: t.approved ?? "none"}));
    const shown = await Promise.all(tools.map((t) => get(`/v1/tools/${encodeURIComponent(t.name)}`)));
    return [
      table([{label: "Tool", value: (t) => t.tool}, {label: "Offered version", value: (t) => String(t.approved)},
        {label: "Waiting", value: (t) => t.pending}, {label: "Versions", value: (t) => String(t.versions)},
        {label: "Description", value: (t) => rich(t.description)}], rows, {label: "Library tools"}),
      ...shown.map(({tool}) => card(tool.tool, h("div", {class: "tool-versions", "data-tool": tool.name},
        tool.versions.map((v) => versionView(tool.name, v))))),
    ];
  }, {label: "Library tools"});
    const discoveries = ctx.live(["toolbox"], async () => {
    const {discoveries: rows} = await get("/v1/toolbox", {limit: MAX_ENTRIES});
    return table([
      {label: "Name", value: (d) => [h("strong", {}, d.name), d.flagged ? [" ", badge("flagged")] : null]},
      {label: "How it works", value: (d) => d.how},
      {label: "Verdict", value: (d) => d.verdict},
      {label: "Link", value: (d) => link(d.link)},
      {label: "Shared by", value: (d) => h("a", {href: `#/agents/${d.by}`}, `Agent ${d.by}`)},
      {label: "Endorsements", value: (d) => fmt.n(d.endorsements)},
      {label: "Updated", value: (d) => fmt.time(d.updated_at)},
      {label: "", value: (d) => h("span", {class: "actions"},
        d.flagged ? null : action("Flag", () => post(`/v1/toolbox/${d.id}/flag`, {}).then(() => "Flagged."),
          {label: `Flag ${d.name}`}),
        action("Remove", () => del(`/v1/toolbox/${d.id}`).then(() => "Removed."),
          {label: `Remove ${d.name}`, kind: "danger",
           confirm: {title: `Remove ${d.name} from the toolbox?`, message: "Agents no longer see it in their toolbox survey.",
                     danger: true, yes: "Remove"}}))},
    ], rows, {label: "Discoveries", empty: "No discoveries yet: agents share them with plaza_toolbox_share."});
  }, {label: "Discoveries"});
  view.append(h("p", {}, "Programs agents packaged as tools. A version is private to its author until you approve it; ",
    "then every agent is offered it as x_ followed by its name, and it runs inside that agent's VM."), list,
    card("Discoveries", h("p", {}, h("small", {}, "What agents found useful and shared. A flagged entry sorts "
    + "last and is marked as flagged; a discovery is information, not a way to call a service.")), discoveries));
}
