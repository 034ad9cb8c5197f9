//# allFunctionsCalledOnLoad
// Library: the files agents hand in (deliverables) and the files they share (the file store: public,
// or shared with only the agents named), one card each with a preview for its type. Search the
// cards, filter them by type, download a file or delete it. A preview loads the bytes from
// /v1/library/{id}/content?inline=1, which the hub serves under its own sandboxing policy: an image,
// a video or a sound plays in its element, a text file shows as text, and an HTML report runs in a frame
// sandboxed without allow-same-origin (an opaque origin: no access to the console, no forms, no
// navigation), so a report an agent wrote can never act as the owner.

import {del, get} from "../api.js";
import {action, badge, fmt, h, pairs, select} from "../ui.js";
import {reportFrame, rich} from "../chips.js";

//: The types the hub sorts items into (domain/library.py KINDS).
const KINDS = ["image", "video", "audio", "pdf", "html", "text", "archive", "other"];
//: The most cards the screen loads.
const ITEMS = 200;
//: A text preview shows at most this many characters, and only of a file this small.
const TEXT_PREVIEW_CHARS = 2000;
const TEXT_PREVIEW_BYTES = 256 * 1024;

const content = (n, inline) => `/v1/library/${encodeURIComponent(n)}/content${inline ? "?inline=1" : ""}`;

function size(bytes) {
  if (bytes < 1024) return `${fmt.n(bytes)} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function preview(item) {
  const src = content(item.number, true);
  if (item.kind === "image") return h("img", {class: "library-image", src, alt: item.title, loading: "lazy"});
  if (item.kind === "video") return h("video", {src, controls: true, preload: "metadata", "aria-label": item.title});
  if (item.kind === "audio") return h("audio", {src, controls: true, preload: "metadata", "aria-label": item.title});
  if (item.kind === "html") return reportFrame(src, `Report: ${item.title}`);
  if (item.kind === "text") {
    if (item.size > TEXT_PREVIEW_BYTES) return h("p", {class: "empty"}, "Too large to preview; download it.");
    const pre = h("pre", {class: "library-text", "aria-label": `Preview of ${item.title}`}, "…");
    fetch(src, {credentials: "same-origin"}).then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.statusText))))
      .then((t) => { pre.textContent = t.length > TEXT_PREVIEW_CHARS ? t.slice(0, TEXT_PREVIEW_CHARS) + "\n…" : t; })
      .catch(() => { pre.textContent = "The preview did not load."; });
    return pre;
  }
  return h("p", {class: "empty"}, `No preview for ${item.kind === "pdf" ? "a PDF" : "this type"}; download it.`);
}

export async function render(view, ctx) {
  const q = h("input", {id: "library-q", name: "q", type: "search", autocomplete: "off", placeholder: "title, description, file"});
  const kind = select("type", [["", "Every type"], ...KINDS.map((k) => [k, k])], "");
  kind.id = "library-type";
  let cards;
  const filter = h("form", {class: "row", role: "search", "aria-label": "Search the Library"},
    h("label", {for: "library-q"}, "Search"), q, h("label", {for: "library-type"}, "Type"), kind,
    h("button", {type: "submit"}, "Search"));
  filter.addEventListener("submit", (e) => { e.preventDefault(); cards.reload(); });
  kind.addEventListener("change", () => cards.reload());
  cards = ctx.live(["item", "library"], async () => {
    const {items} = await get("/v1/library", {q: q.value.trim() || undefined, type: kind.value || undefined, limit: ITEMS});
    if (!items.length) return h("p", {class: "empty"}, q.value || kind.value ? "Nothing matches." : "No deliverables yet.");
    return h("div", {class: "library"}, items.map((i) => h("article", {class: "card library-card", "aria-label": `${i.number} ${i.title}`,
      "data-item": i.number},
      h("h2", {}, i.number, " ", rich(i.title), " ", badge(i.kind, "kind")),
      preview(i),
      i.description ? h("p", {}, rich(i.description)) : null,
      pairs({File: i.filename, Size: size(i.size), Type: i.media_type, "Handed in": `${fmt.time(i.submitted_at)} by ${i.by}`,
        ...(i.task ? {Task: h("a", {href: `#/tasks/${i.task}`}, i.task)} : {}), ...(i.project ? {Project: i.project} : {})}),
      h("div", {class: "actions"},
        h("a", {class: "button", href: content(i.number, false), download: i.filename, "aria-label": `Download ${i.number}`}, "Download"),
        action("Delete", () => del(`/v1/library/${encodeURIComponent(i.number)}`).then(() => "Deleted."),
          {label: `Delete ${i.number}`, confirm: {title: `Delete ${i.number}?`, danger: true, yes: "Delete",
            message: `${i.title} and its bytes are removed from the Library.`}})))));
  }, {label: "Deliverables"});
  const shared = ctx.live(["sharedfile"], async () => {
    const {files} = await get("/v1/library/shared", {q: q.value.trim() || undefined, type: kind.value || undefined, limit: ITEMS});
    if (!files.length) return h("p", {class: "empty"}, q.value || kind.value ? "No shared file matches." : "No shared files yet.");
    return h("div", {class: "library"}, files.map((f) => h("article", {class: "card library-card", "aria-label": `${f.number} ${f.filename}`,
      "data-item": f.number},
      h("h3", {}, f.number, " ", f.filename, " ", badge(f.kind, "kind"), " ", badge(f.public ? "public" : "named", f.public ? "ok" : "warn")),
      preview({...f, title: f.filename}),
      pairs({Path: f.path, Size: size(f.size), Type: f.media_type, "Shared": `${fmt.time(f.shared_at)} by ${f.by}`,
        "Who may read": f.public ? "every agent" : [`@${f.owner}`, ...f.agents.map((a) => `@${a}`)].join(", ")}),
      h("div", {class: "actions"},
        h("a", {class: "button", href: content(f.number, false), download: f.filename, "aria-label": `Download ${f.number}`}, "Download"),
        action("Delete", () => del(`/v1/library/${encodeURIComponent(f.number)}`).then(() => "Deleted."),
          {label: `Delete ${f.number}`, confirm: {title: `Delete ${f.number}?`, danger: true, yes: "Delete",
            message: `${f.filename} and its bytes are removed from the file store.`}})))));
  }, {label: "Shared files"});
  filter.addEventListener("submit", () => shared.reload());
  kind.addEventListener("change", () => shared.reload());
  view.append(filter, h("h2", {}, "Deliverables"), cards, h("h2", {}, "Shared files"), shared);
}
