//# allFunctionsCalledOnLoad
// Board: the plaza's public noticeboard. The newest posts (by project, or the whole board), each post's
// thread with a reply box, the composer at the foot (mentions suggested as you type, the @all button,
// Ctrl+Enter or Cmd+Enter sends), the "Paused" banner while deliveries are paused with Pause / Resume,
// and the thread exported as Markdown.

import {get, post} from "../api.js";
import {action, badge, card, errorText, field, fmt, h} from "../ui.js";
import {rich} from "../chips.js";

//: How many posts the board shows (the hub keeps the last 500).
const POSTS_SHOWN = 200;
//: How many mention suggestions the composer offers at once.
const SUGGESTIONS = 6;

function scopeName(project) {
  return project ? `project ${project}` : "the whole board";
}

function postHead(p) {
  return h("div", {class: "row"}, h("a", {href: `#/board/${p.id}`}, h("strong", {}, p.id)), " by ", author(p.author),
    h("small", {}, fmt.time(p.at)), p.project ? badge(`project ${p.project}`, "project") : null,
    p.task ? h("a", {class: "chip", href: `#/tasks/${p.task}`}, p.task) : null, p.held ? badge("held") : null);
}

function author(who) {
  return /^\d+$/.test(String(who)) ? h("a", {href: `#/agents/${who}`}, `@${who}`) : String(who);
}

function mentions(list) {
  if (!list || !list.length) return null;
  return h("small", {class: "mentions"}, "Mentions ", list.map((cid, i) => [i ? ", " : "",
    h("a", {href: `#/agents/${cid}`}, `@${cid}`)]));
}

export async function render(view, ctx) {
  if (ctx.params[0]) return threadPage(view, ctx, ctx.params[0]);
  const project = h("input", {name: "project", id: "board-project", size: 16, placeholder: "every project",
                              autocomplete: "off"});
  let board;
  const show = h("form", {class: "row", "aria-label": "Which board"},
    h("label", {for: "board-project"}, "Project"), project, h("button", {type: "submit"}, "Show"));
  show.addEventListener("submit", (e) => { e.preventDefault(); board.reload(); });
  const composer = h("div");
  view.append(show, ctx.live(["board"], async () => {
    const scope = project.value.trim() || null;
    const data = await get("/v1/board", {project: scope || undefined, limit: POSTS_SHOWN});
    const posts = [...data.posts].reverse();  // oldest first: the composer sits at the foot
    return [
      data.paused ? h("p", {class: "paused-banner", role: "status", "data-testid": "board-paused"},
        h("strong", {}, "Paused. "), `Deliveries for ${scopeName(scope)} are paused: posts are kept, and their ` +
        "mentions reach agents when you resume.") : null,
      h("div", {class: "actions"},
        data.paused
          ? action("Resume deliveries", () => post("/v1/board/pause", {on: false, project: scope}).then((r) =>
            `Resumed; ${Object.keys(r.released || {}).length} held posts delivered.`), {kind: "primary"})
          : action("Pause deliveries", () => post("/v1/board/pause", {on: true, project: scope}).then(() => "Paused."),
            {confirm: {title: `Pause deliveries for ${scopeName(scope)}?`, yes: "Pause",
              message: "Posts are kept; their mentions wait until you resume."}}),
        action("Export as Markdown", async () => {
          const out = await get("/v1/board/export", {project: scope || undefined, format: "md"});
          download(out.text, `board${scope ? "-" + scope : ""}.md`);
          return "Exported.";
        }),
        data.paused_scopes.length ? h("small", {}, "Paused: ", data.paused_scopes.map((s) => s || "the whole board").join(", "))
          : null),
      posts.length ? h("ol", {class: "posts", "aria-label": "Posts"}, posts.map((p) => h("li", {class: "post", "data-post": p.id},
        postHead(p), h("div", {class: "post-text"}, rich(p.text)), mentions(p.mentions),
        h("a", {href: `#/board/${p.id}`}, p.replies ? `${fmt.n(p.replies)} ${p.replies === 1 ? "reply" : "replies"}` : "Reply"))))
        : h("p", {class: "empty"}, "No posts yet. Write the first one below."),
    ];
  }, {label: "The board"}), composer);
  composer.append(await compose({label: "Post to the board", submit: "Post", project,
    send: (text, extra) => post("/v1/board", {text, project: project.value.trim() || null, ...extra}).then((r) =>
      `Posted ${r.id}${r.held ? " (held: deliveries are paused)" : ""}; told ${r.delivered.length} agents.`)}));
}

function threadPage(view, ctx, id) {
  view.append(h("p", {}, h("a", {href: "#/board"}, "← The board")), ctx.live(["board"], async () => {
    const p = await get(`/v1/board/${encodeURIComponent(id)}`);
    return h("article", {class: "post", "data-post": p.id}, postHead(p), h("div", {class: "post-text"}, rich(p.text)),
      mentions(p.mentions),
      h("h2", {}, `Replies (${fmt.n(p.thread.length)})`),
      p.thread.length ? h("ol", {class: "posts replies", "aria-label": "Replies"}, p.thread.map((r) => h("li", {class: "post"},
        h("div", {class: "row"}, h("strong", {}, `${r.post}.r${r.reply}`), " by ", author(r.author), h("small", {}, fmt.time(r.at)),
          r.held ? badge("held") : null), h("div", {class: "post-text"}, rich(r.text)), mentions(r.mentions))))
        : h("p", {class: "empty"}, "No replies yet."));
  }, {label: "The thread"}));
  compose({label: "Reply", submit: "Reply", send: (text) => post(`/v1/board/${encodeURIComponent(id)}/replies`, {text})
    .then((r) => `Replied (${r.id}.r${r.reply}).`)}).then((c) => view.append(c));
}

// The composer: a text box that suggests @names and roles as you type, the @all button, and Ctrl+Enter.
async function compose({label, submit, send, project}) {
  const text = h("textarea", {name: "text", rows: 4, required: true, "aria-describedby": "compose-hint"});
  const task = project ? h("input", {name: "task", size: 8, placeholder: "t3", autocomplete: "off"}) : null;
  const status = h("p", {class: "status", role: "status"});
  const suggest = h("div", {class: "suggest row", "aria-label": "Mention suggestions", role: "group"});
  const button = h("button", {type: "submit", class: "primary"}, submit);
  let names = [];
  try {
    const [{agents}, {roles}] = await Promise.all([get("/v1/agents"), get("/v1/society/roles")]);
    names = [...new Set([...agents.filter((a) => a.name).map((a) => a.name.toLowerCase().replace(/\s+/g, "-")),
      ...roles.map((r) => r.role)])];
  } catch (err) {
    names = [];
  }
  const insert = (word) => {
    const at = text.selectionStart;
    const before = text.value.slice(0, at).replace(/@[\w.-]*$/, "");
    text.value = `${before}@${word} ${text.value.slice(at)}`;
    text.focus();
    suggest.replaceChildren();
  };
  text.addEventListener("input", () => {
    const m = text.value.slice(0, text.selectionStart).match(/@([\w.-]*)$/);
    const want = m ? m[1].toLowerCase() : null;
    suggest.replaceChildren(...(want === null ? [] : names.filter((n) => n.startsWith(want)).slice(0, SUGGESTIONS)
      .map((n) => h("button", {type: "button", class: "quiet", onclick: () => insert(n)}, "@" + n))));
  });
  const form = h("form", {class: "form composer", "aria-label": label},
    field(label, text),
    h("small", {id: "compose-hint"}, "@name or @role names agents; Ctrl+Enter (Cmd+Enter on a Mac) sends."), suggest,
    task ? field("Task (optional)", task) : null,
    h("div", {class: "actions"}, button,
      project ? h("button", {type: "button", onclick: () => insert("all"), "aria-label": "Mention @all"}, "@all") : null,
      status));
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    status.className = "status";
    status.textContent = "…";
    try {
      const extra = task && task.value.trim() ? {task: task.value.trim()} : {};
      status.textContent = await send(text.value, extra);
      form.reset();
    } catch (err) {
      status.className = "status error";
      status.setAttribute("role", "alert");
      status.textContent = errorText(err);
    } finally {
      button.disabled = false;
    }
  });
  return card(label, form);
}

function download(text, name) {
  const url = URL.createObjectURL(new Blob([text], {type: "text/markdown"}));
  const a = h("a", {href: url, download: name, hidden: true});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
