//# allFunctionsCalledOnLoad
// Git: the plaza's git host. The counts; the repositories (make one) with their branches, commits and
// files; the pull requests by state, and a pull request's page with its diff, comments and reviews, and
// the owner's Comment, Review, Merge and Close.

import {get, post} from "../api.js";
import {action, badge, card, field, fmt, form, h, pairs, select, table} from "../ui.js";
import {rich} from "../chips.js";

const STATES = [["open", "Open"], ["merged", "Merged"], ["closed", "Closed"], ["all", "All"]];
const METHODS = [["auto", "Auto (fast-forward when it can)"], ["ff", "Fast-forward only"], ["merge", "Merge commit"]];
const VERDICTS = [["approve", "Approve"], ["request_changes", "Request changes"]];
const FAMILIES = ["repo", "pullrequest", "forge"];

const short = (sha) => (sha ? sha.slice(0, 10) : "—");
const enc = encodeURIComponent;

export async function render(view, ctx) {
  const [kind, name] = ctx.params;
  if (kind === "repo" && name) return repoPage(view, ctx, name);
  if (kind === "pr" && name) return prPage(view, ctx, name);
  const state = select("state", STATES, "open");
  state.id = "git-state";
  let prs;
  state.addEventListener("change", () => prs.reload());
  prs = ctx.live(FAMILIES, async () => {
    const list = (await get("/v1/git/prs", {state: state.value})).prs;
    return table([
      {label: "Pull request", value: (p) => h("a", {href: `#/git/pr/${p.number}`}, p.number), sort: (p) => Number(p.number.slice(2))},
      {label: "Title", value: (p) => rich(p.title), sort: (p) => p.title},
      {label: "Repository", value: (p) => h("a", {href: `#/git/repo/${enc(p.repo)}`}, p.repo), sort: (p) => p.repo},
      {label: "Branches", value: (p) => `${p.source} → ${p.target}`},
      {label: "Author", value: (p) => p.author},
      {label: "State", value: (p) => badge(p.state), sort: (p) => p.state},
      {label: "Reviews", value: (p) => `${p.approvals} approved, ${p.changes_requested} changes asked`},
      {label: "Opened", value: (p) => fmt.time(p.opened_at), sort: (p) => p.opened_at},
    ], list, {sortable: true, label: "Pull requests", empty: "No pull requests in this state."});
  }, {label: "The pull requests"});
  view.append(
    ctx.live(FAMILIES, async () => {
      const s = await get("/v1/git/status");
      return h("div", {class: "grid counts", "aria-label": "Counts"}, [["Repositories", s.repos], ["Branches", s.branches],
        ["Open pull requests", s.prs_open], ["Merged", s.prs_merged], ["Closed", s.prs_closed]].map(([k, v]) =>
        card(k, h("p", {class: "stat"}, fmt.n(v)))));
    }, {label: "Counts"}),
    card("Pull requests", h("div", {class: "row"}, h("label", {for: "git-state"}, "Show"), state), prs),
    ctx.live(FAMILIES, async () => {
      const {repos} = await get("/v1/git/repos");
      return card("Repositories", table([
        {label: "Repository", value: (r) => h("a", {href: `#/git/repo/${enc(r.name)}`}, r.name), sort: (r) => r.name},
        {label: "Default branch", value: (r) => r.default_branch},
        {label: "Branches", value: (r) => fmt.n(r.branches), sort: (r) => r.branches},
        {label: "Open pull requests", value: (r) => fmt.n(r.open_prs), sort: (r) => r.open_prs},
        {label: "Pushes", value: (r) => fmt.n(r.pushes), sort: (r) => r.pushes},
        {label: "Last push", value: (r) => (r.last_push_at ? `${fmt.time(r.last_push_at)} by ${r.last_push_by}` : "—")},
        {label: "Project", value: (r) => r.project || "—"},
      ], repos, {sortable: true, label: "Repositories", empty: "No repositories yet."}));
    }, {label: "The repositories"}),
    h("details", {class: "card"}, h("summary", {}, "New repository"), form({
      label: "New repository", submit: "Create repository",
      fields: [field("Name", h("input", {name: "name", required: true, autocomplete: "off"}),
        "Lower-case letters, digits, - and _."), field("Project (optional)", h("input", {name: "project"}))],
      send: async (d, el) => {
        const body = {name: String(d.get("name"))};
        if (d.get("project")) body.project = String(d.get("project"));
        const {repo} = await post("/v1/git/repos", body);
        el.reset();
        return `Created ${repo.name}.`;
      }})));
}

function repoPage(view, ctx, name) {
  const branch = select("branch", [], "");
  branch.id = "git-branch";
  let path = "";
  let browse;
  const commits = ctx.live(FAMILIES, async () => {
    if (!branch.value) return h("p", {class: "empty"}, "…");
    const {commits: list} = await get(`/v1/git/repos/${enc(name)}/commits`, {branch: branch.value});
    return table([{label: "Commit", value: (c) => h("code", {}, short(c.commit))}, {label: "Subject", value: (c) => rich(c.subject)},
      {label: "Author", value: (c) => c.author}, {label: "When", value: (c) => fmt.time(c.at)}],
    list, {label: "Commits", empty: "No commits."});
  }, {label: "The commits"});
  branch.addEventListener("change", () => { path = ""; commits.reload(); browse.reload(); });
  browse = ctx.live(FAMILIES, async () => {
    if (!branch.value) return h("p", {class: "empty"}, "…");
    const f = await get(`/v1/git/repos/${enc(name)}/files${path ? "/" + path.split("/").map(enc).join("/") : ""}`,
      {ref: branch.value});
    const go = (p) => h("button", {type: "button", class: "link", onclick: () => { path = p; browse.reload(); }}, p.split("/").pop() || name);
    const crumbs = [go("")];
    path.split("/").filter(Boolean).forEach((_, i, parts) => crumbs.push(" / ", go(parts.slice(0, i + 1).join("/"))));
    if (f.type === "folder") {
      return [h("p", {class: "row", "aria-label": "Path"}, crumbs), table([
        {label: "Name", value: (e) => (e.type === "folder" || e.type === "file"
          ? go(path ? `${path}/${e.name}` : e.name) : e.name)},
        {label: "Type", value: (e) => e.type}, {label: "Size", value: (e) => (e.size === null || e.size === undefined ? "—" : fmt.n(e.size) + " B")},
      ], f.entries, {label: "Files", empty: "An empty folder."})];
    }
    return [h("p", {class: "row", "aria-label": "Path"}, crumbs), h("p", {}, `${fmt.n(f.size)} bytes`,
      f.truncated ? " (the first 1 MiB shown)" : ""),
    f.binary ? h("p", {class: "empty"}, "A binary file.") : h("pre", {"aria-label": f.path}, f.content)];
  }, {label: "The files"});
  view.append(h("p", {}, h("a", {href: "#/git"}, "← Git")), ctx.live(FAMILIES, async () => {
    const {repo} = await get(`/v1/git/repos/${enc(name)}`);
    const keep = branch.value || repo.default_branch;
    branch.replaceChildren(...repo.branches.map((b) => h("option", {value: b.branch, selected: b.branch === keep}, b.branch)));
    if (!branch.value) branch.value = keep;
    commits.reload();
    browse.reload();
    return [h("h2", {}, repo.name), pairs({"Default branch": repo.default_branch, Project: repo.project,
      Created: `${fmt.time(repo.created_at)} by ${repo.created_by}`, Pushes: fmt.n(repo.pushes),
      "Clone with": `git clone ${location.origin}/git/${repo.name}.git`}),
    card("Branches", table([{label: "Branch", value: (b) => [b.branch, b.default ? [" ", badge("default")] : null]},
      {label: "Commit", value: (b) => h("code", {}, short(b.commit))},
      {label: "Moved", value: (b) => `${fmt.time(b.updated_at)} by ${b.updated_by}`}], repo.branches, {label: "Branches"}))];
  }, {label: "The repository"}),
  card("Commits and files", h("div", {class: "row"}, h("label", {for: "git-branch"}, "Branch"), branch),
    h("h3", {}, "Commits"), commits, h("h3", {}, "Files"), browse));
}

function prPage(view, ctx, number) {
  view.append(h("p", {}, h("a", {href: "#/git"}, "← Git")), ctx.live(FAMILIES, async () => {
    const [{pr}, diff] = await Promise.all([get(`/v1/git/prs/${enc(number)}`), get(`/v1/git/prs/${enc(number)}/diff`)]);
    const open = pr.state === "open";
    const method = select("method", METHODS, "auto");
    return [
      h("h2", {}, `${pr.number}: `, rich(pr.title), " ", badge(pr.state)),
      pairs({Repository: h("a", {href: `#/git/repo/${enc(pr.repo)}`}, pr.repo), Branches: `${pr.source} → ${pr.target}`,
        Author: pr.author, Opened: fmt.time(pr.opened_at), Head: short(pr.head), Base: short(pr.base),
        Reviews: `${pr.approvals} approved, ${pr.changes_requested} changes asked`,
        ...(pr.ended_at ? {Ended: `${fmt.time(pr.ended_at)} by ${pr.ended_by}`} : {}),
        ...(pr.merge_commit ? {Merged: `${pr.merge_method}, ${short(pr.merge_commit)}`} : {})}),
      pr.body ? h("div", {class: "card"}, rich(pr.body)) : null,
      open ? h("div", {class: "actions", role: "toolbar", "aria-label": "Pull request actions"},
        field("Merge method", method),
        action("Merge", () => post(`/v1/git/prs/${enc(pr.number)}/merge`, {method: method.value}).then(() => "Merged."),
          {kind: "primary", label: `Merge ${pr.number}`, confirm: {title: `Merge ${pr.number}?`, yes: "Merge",
            message: `${pr.source} goes into ${pr.target} of ${pr.repo}.`}}),
        action("Close", () => post(`/v1/git/prs/${enc(pr.number)}/close`, {}).then(() => "Closed."),
          {label: `Close ${pr.number}`, confirm: {title: `Close ${pr.number} without merging?`, yes: "Close", danger: true}}))
        : null,
      card(`Files changed (${diff.files.length})`, table([{label: "File", value: (f) => f.path},
        {label: "Added", value: (f) => "+" + fmt.n(f.added)}, {label: "Removed", value: (f) => "−" + fmt.n(f.removed)}],
      diff.files, {label: "Files changed", empty: "No change."}),
      h("details", {}, h("summary", {}, "The patch", diff.truncated ? " (the first 1 MiB)" : ""), h("pre", {class: "patch"}, diff.patch))),
      card("Comments and reviews", pr.notes.length ? h("ol", {class: "transcript", "aria-label": "Comments and reviews"},
        pr.notes.map((n) => h("li", {}, h("div", {class: "row"}, h("strong", {}, n.by), h("small", {}, fmt.time(n.at)),
          n.kind === "review" ? badge(n.verdict === "approve" ? "approved" : "changes requested", n.verdict === "approve" ? "approved" : "denied")
            : null), n.text ? h("div", {}, rich(n.text)) : null)))
        : h("p", {class: "empty"}, "No comments or reviews yet.")),
    ];
  }, {label: "The pull request"}),
  h("div", {class: "grid"},
    card("Comment", form({label: "Comment", submit: "Comment", fields: [field("Comment", h("textarea", {name: "text", rows: 3, required: true}))],
      send: async (d, el) => { await post(`/v1/git/prs/${enc(number)}/comment`, {text: String(d.get("text"))}); el.reset(); return "Commented."; }})),
    card("Review", form({label: "Review", submit: "Send review", fields: [field("Verdict", select("verdict", VERDICTS, "approve")),
      field("Review", h("textarea", {name: "text", rows: 3}), "Request changes needs a text.")],
    send: async (d, el) => {
      await post(`/v1/git/prs/${enc(number)}/review`, {verdict: String(d.get("verdict")), text: String(d.get("text") || "")});
      el.reset();
      return "Reviewed.";
    }}))));
}
