//# allFunctionsCalledOnLoad
// Small DOM helpers: elements from data (text only, never HTML), tables, forms, dialogs, numbers.

//: "On the Treasury screen one credit is shown as $0.001."
export const DOLLARS_PER_CREDIT = 0.001;
//: Rows a table shows before "Show more": about a screenful at 1280x800. Each row is a dozen nodes or more
//: to build, lay out and paint; two 50-row tables made Treasury's first draw 14% slower than two of 25
//: (bench/console.py, two hubs side by side, 35 loads each in turn).
export const PAGE_ROWS = 25;

// h("button", {class: "x", onclick: fn, "aria-label": "…"}, "text", child, …)
// A Treasury screen makes some 1,500 elements this way as it first draws, before anything shows: so no
// array is made per element (Object.entries, kids.flat) and a string goes in as it is (append makes the
// text node): the same elements in about two thirds of the time, cold (bench/console.py's page).
export function h(tag, props, ...kids) {
  const el = document.createElement(tag);
  for (const k in props) {
    const v = props[k];
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function" && k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, kids);
  return el;
}

// The kids in order, arrays at any depth flattened; undefined, null and false left out.
function append(el, kids) {
  for (const k of kids) {
    if (k === undefined || k === null || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else el.append(k instanceof Node ? k : String(k));
  }
}

export function fill(el, ...kids) {
  el.replaceChildren();
  append(el, kids);
  return el;
}

// Numbers and times are written out here rather than through Intl: a page's first Intl formatter loads
// the locale's data, 40 to 60 ms of the first draw (bench/console.py). The forms are Intl's own: en-US
// numbers (1,234,567.5; -$1,234.567), en-GB medium date and time (2 Dec 2026, 07:46:53).
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sept", "Oct", "Nov", "Dec"];

// |x| with thousands separators, at least min and at most max fraction digits (rounded as written in
// decimal: 7.0005 is 7.001).
function digits(x, min, max) {
  const a = Math.abs(x);
  const rounded = a < 1e15 ? Number(Math.round(Number(a + "e" + max)) + "e-" + max) : a;
  let [whole, frac = ""] = rounded.toFixed(max).split(".");
  frac = frac.replace(/0+$/, "").padEnd(min, "0");
  whole = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return frac ? whole + "." + frac : whole;
}

function number(x) {
  const v = Number(x);
  return isFinite(v) ? (v < 0 ? "-" : "") + digits(v, 0, 3) : String(x);
}

function usd(x) {
  const v = Number(x);
  return isFinite(v) ? (v < 0 ? "-$" : "$") + digits(v, 2, 3) : String(x);
}

const two = (n) => String(n).padStart(2, "0");

export const fmt = {
  n: (x) => (x === null || x === undefined ? "—" : number(x)),
  credits: (x) => (x === null || x === undefined ? "—" : number(x) + " cr"),
  dollars: (credits) => (credits === null || credits === undefined ? "—" : usd(credits * DOLLARS_PER_CREDIT)),
  time: (iso) => {
    if (!iso) return "—";
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : `${d.getDate()} ${MONTHS[d.getMonth()]} ${d.getFullYear()}, ` +
      `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  },
  ago: (iso) => {
    const s = Math.round((Date.now() - new Date(iso)) / 1000);
    if (!isFinite(s)) return "";
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  },
};

export function money(credits) {
  // Two text nodes, not three: a Treasury screen draws some 250 of these (bench/console.py).
  return h("span", {class: "money"}, fmt.credits(credits), h("small", {}, " " + fmt.dollars(credits)));
}

// A refusal, readable, next to what caused it.
export function errorText(err) {
  if (!err) return "";
  return err.code ? `${err.message} (${err.code})` : String(err.message || err);
}

export function errorBox(err) {
  return h("p", {class: "error", role: "alert"}, errorText(err));
}

export function badge(text, kind = text) {
  return h("span", {class: "badge badge-" + String(kind).toLowerCase().replace(/[^a-z0-9]+/g, "-")}, text);
}

// The message next to a form or a button (its data-note names which): a refusal is an alert. A section
// drawn again has new forms and buttons; the message goes to the one that took the old one's place.
function say(note, text, error = false) {
  const n = latest(note);
  n.classList.toggle("error", error);
  n.setAttribute("role", error ? "alert" : "status");
  n.textContent = text;
}

const successor = new WeakMap();
const latest = (n) => (successor.has(n) ? latest(successor.get(n)) : n);

// A live section drawn again (frame.js) keeps the messages next to its forms and buttons: the reload an
// event brings is often the event of the very change the message tells of ("Volume corpus made"), or
// lands while a refusal is shown, and must not wipe it. keepNotes(section) before the section is filled
// again; the function it returns, after: each old message (a form's by its label, a button's by its
// label or text, in order) goes to the new one of the same name, and a reply still on its way follows.
export function keepNotes(root) {
  const old = [...root.querySelectorAll("[data-note]")];
  return (now) => {
    const fresh = new Map();
    for (const n of now.querySelectorAll("[data-note]")) fresh.set(n.dataset.note, [...(fresh.get(n.dataset.note) || []), n]);
    for (const n of old) {
      const next = (fresh.get(n.dataset.note) || []).shift();
      if (!next) continue;
      successor.set(n, next);
      if (n.textContent) {
        next.className = n.className;
        next.setAttribute("role", n.getAttribute("role"));
        next.textContent = n.textContent;
      }
    }
  };
}

// A live section drawn again (frame.js) keeps what the owner has typed into its forms, and the field
// they are in with its caret: an event (a change made elsewhere) must not wipe a half-written rule or a
// reason. keepTyped(section) before the section is filled again; the function it returns, after: each
// field the owner changed (inputs, textareas, selects, checkboxes and radios) goes to the new field of the
// same key: the names (aria-label) of the forms and groups around it, its own name, and a choice's value.
// A key that is not one field's alone, before and after (rows' forms of one name), is not carried: a
// value never goes into another row's form. A secret goes only from the old field to the new one, in
// memory. A form reset (a sent form clears itself) forgets that its fields were typed into.
const typed = new WeakSet();
document.addEventListener("input", (e) => typed.add(e.target), true);
document.addEventListener("change", (e) => typed.add(e.target), true);
document.addEventListener("reset", (e) => { for (const f of e.target.elements || []) typed.delete(f); }, true);

const FIELDS = "input[name], textarea[name], select[name]";
const CHOICE = new Set(["checkbox", "radio"]);
const CARET = new Set(["text", "search", "url", "tel", "password", "textarea"]);

function fieldKey(f, root) {
  const names = [];
  for (let n = f.parentElement; n && n !== root; n = n.parentElement) {
    if (n.hasAttribute("aria-label")) names.unshift(n.getAttribute("aria-label"));
  }
  return JSON.stringify([names, f.name, CHOICE.has(f.type) ? f.value : null]);
}

function byKey(root) {
  const out = new Map();
  for (const f of root.querySelectorAll(FIELDS)) {
    if (f.type === "hidden" || f.type === "file") continue;
    const k = fieldKey(f, root);
    out.set(k, out.has(k) ? null : f);  // null: more than one field has this key
  }
  return out;
}

export function keepTyped(root) {
  const old = byKey(root);
  const focused = root.contains(document.activeElement) ? document.activeElement : null;
  return (now) => {
    const fresh = byKey(now);
    for (const [k, f] of old) {
      const next = fresh.get(k);
      if (!f || !next) continue;
      if (typed.has(f)) {
        if (CHOICE.has(f.type)) next.checked = f.checked;
        else if (f.tagName === "SELECT") {
          const picked = new Set([...f.selectedOptions].map((o) => o.value));
          if (![...picked].every((v) => [...next.options].some((o) => o.value === v))) continue;
          for (const o of next.options) o.selected = picked.has(o.value);
        } else next.value = f.value;
        typed.add(next);
      }
      if (f === focused) {
        next.focus({preventScroll: true});
        if (CARET.has(f.type) && f.selectionStart !== null) {
          next.setSelectionRange(f.selectionStart, f.selectionEnd, f.selectionDirection || "none");
        }
      }
    }
  };
}

// columns: [{label, value(row) -> node|string, sort(row) -> comparable}]; rows paginate by PAGE_ROWS
// (page: Infinity for a list that pages itself, as the journal does with Load older).
export function table(columns, rows, {empty = "Nothing yet.", caption, sortable = false, label, page = PAGE_ROWS} = {}) {
  if (!rows.length) return h("p", {class: "empty"}, empty);
  let shown = page;
  let order = null;
  const wrap = h("div", {class: "table-wrap"});
  const draw = () => {
    let list = rows;
    if (order) {
      const col = columns[order.i];
      const key = col.sort || col.value;
      list = [...rows].sort((a, b) => {
        const x = key(a), y = key(b);
        return (x > y ? 1 : x < y ? -1 : 0) * order.dir;
      });
    }
    const head = h("tr", {}, columns.map((c, i) => {
      if (!sortable || c.nosort) return h("th", {scope: "col"}, c.label);
      const dir = order && order.i === i ? order.dir : 0;
      return h("th", {scope: "col", "aria-sort": dir ? (dir > 0 ? "ascending" : "descending") : "none"},
        h("button", {class: "sort", onclick: () => {
          order = {i, dir: order && order.i === i ? -order.dir : 1};
          draw();
        }}, c.label, dir ? (dir > 0 ? " ▲" : " ▼") : ""));
    }));
    const body = list.slice(0, shown).map((r) => h("tr", {}, columns.map((c) => h("td", {"data-label": c.label},
      c.value(r)))));
    const more = list.length > shown
      ? h("button", {class: "more", onclick: () => { shown += page; draw(); }},
        `Show more (${fmt.n(list.length - shown)} left)`)
      : null;
    fill(wrap, h("table", {"aria-label": label || caption}, caption ? h("caption", {}, caption) : null,
      h("thead", {}, head), h("tbody", {}, body)), more);
  };
  draw();
  return wrap;
}

// A labelled field: input, select or textarea.
export function field(label, control, hint) {
  const id = control.id || "f-" + Math.random().toString(36).slice(2, 9);
  control.id = id;
  return h("div", {class: "field"}, h("label", {for: id}, label), control, hint ? h("small", {}, hint) : null);
}

export function select(name, options, value) {
  return h("select", {name}, options.map((o) => {
    const [v, text] = Array.isArray(o) ? o : [o, o];
    return h("option", {value: v, selected: v === value}, text);
  }));
}

// A form that sends with the given function; a refusal shows beside its button, the form stays filled.
export function form({label, fields, submit, send, done}) {
  const status = h("p", {class: "status", role: "status", "data-note": "form " + label});
  const button = h("button", {type: "submit", class: "primary"}, submit);
  const el = h("form", {class: "form", "aria-label": label}, fields, h("div", {class: "actions"}, button, status));
  el.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    say(status, "…");
    try {
      const out = await send(new FormData(el), el);
      say(status, (done && done(out)) || "Done.");
    } catch (err) {
      say(status, errorText(err), true);
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

// A button that runs an action; its refusal shows next to it.
export function action(text, run, {kind = "", label, confirm: ask} = {}) {
  const note = h("span", {class: "note", role: "status", "data-note": "action " + (label || text)});
  const b = h("button", {type: "button", class: kind, "aria-label": label}, text);
  b.addEventListener("click", async () => {
    say(note, "");
    let reason;
    if (ask) {
      const answer = await confirm(ask);
      if (!answer) return;
      reason = answer.reason;
    }
    b.disabled = true;
    try {
      const out = await run(reason);
      if (typeof out === "string") say(note, out);
    } catch (err) {
      say(note, errorText(err), true);
    } finally {
      b.disabled = false;
    }
  });
  return h("span", {class: "action"}, b, note);
}

// A modal question: resolves to {reason} on yes, null on no or Escape.
// ask: {title, message, reason: "Reason" label or false, required, yes}
export function confirm(ask) {
  return new Promise((resolve) => {
    const reason = ask.reason ? h("input", {name: "reason", required: ask.required || undefined,
                                            autocomplete: "off"}) : null;
    const d = h("dialog", {class: "confirm", "aria-label": ask.title},
      h("form", {method: "dialog"},
        h("h2", {}, ask.title),
        ask.message ? h("p", {}, ask.message) : null,
        reason ? field(ask.reason, reason) : null,
        h("div", {class: "actions"},
          h("button", {value: "yes", class: ask.danger ? "danger" : "primary"}, ask.yes || "Confirm"),
          h("button", {value: "no", formnovalidate: true}, "Cancel"))));
    d.addEventListener("close", () => {
      const yes = d.returnValue === "yes";
      d.remove();
      resolve(yes ? {reason: reason ? reason.value : undefined} : null);
    });
    document.body.append(d);
    d.showModal();
    (reason || d.querySelector("button")).focus();
  });
}

export function card(title, ...kids) {
  return h("section", {class: "card", "aria-label": title}, h("h2", {}, title), kids);
}

export function pairs(obj) {
  return h("dl", {class: "pairs"}, Object.entries(obj).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "—")]));
}
