//# allFunctionsCalledOnLoad
// Treasury, in the five parts of "Reading the Treasury screen": the totals and the flows over a range,
// the wallets (sortable), the journal (newest first, filters, load older, live), balances over time,
// and the buttons Mint budget and Fine an agent; and the payments' approval threshold (approve_over,
// under payments in the plaza's settings: GET and PATCH /v1/settings).

import {get, patch, post} from "../api.js";
import {card, field, fmt, form, h, money, select, table} from "../ui.js";

const JOURNAL_KINDS = ["Mint", "Subcontract", "Spend", "Model call", "Payment", "Refund", "Fine", "Transfer", "Bonus"];
//: The ranges the flows and the chart can show, in hours (0: since the plaza began).
const RANGES = [["24", "Last 24 hours"], ["168", "Last 7 days"], ["720", "Last 30 days"], ["0", "All time"]];
const FLOWS = [["minted", "Minted"], ["escrowed", "Escrowed"], ["paid", "Paid"], ["refunded", "Refunded"],
               ["fined", "Fined"], ["spent", "Spent"], ["model_calls", "Model calls"]];
//: Journal entries per page: one table page (ui.js's PAGE_ROWS), then Load older.
const JOURNAL_PAGE = 25;

export async function render(view, ctx) {
  const range = select("range", RANGES, "0");
  range.id = "tr-range";
  const since = () => (range.value === "0" ? undefined : new Date(Date.now() - Number(range.value) * 3600e3).toISOString());
  const totals = ctx.live(["treasury"], async () => {
    const [b, f] = await Promise.all([get("/v1/treasury"), get("/v1/treasury/flows", {from: since()})]);
    return [h("div", {class: "grid"}, card("Plaza budget", h("p", {class: "stat", "data-testid": "budget"}, money(b.budget))),
      card("In circulation", h("p", {class: "stat"}, money(f.flows.in_circulation)), h("small", {}, "wallets and escrows"))),
    h("div", {class: "grid"}, FLOWS.map(([k, label]) => card(label, h("p", {class: "stat"}, money(f.flows[k])))))];
  }, {label: "Totals"});
  range.addEventListener("change", () => { totals.reload(); chart.reload(); });

  const buttons = h("div", {class: "grid"},
    card("Mint budget", form({label: "Mint budget", submit: "Mint",
      fields: [field("Credits", h("input", {name: "amount", type: "number", min: 1, required: true})),
        field("Memo", h("input", {name: "memo"}))],
      send: async (d, el) => {
        const out = await post("/v1/treasury/mint", {amount: Number(d.get("amount")), memo: d.get("memo") || undefined});
        el.reset();
        return `Minted. The plaza budget is now ${fmt.credits(out.balances.budget)}.`;
      }})),
    card("Fine an agent", form({label: "Fine an agent", submit: "Fine",
      fields: [field("Agent (CID)", h("input", {name: "cid", required: true, size: 6})),
        field("Credits", h("input", {name: "amount", type: "number", min: 1, required: true})),
        field("Memo", h("input", {name: "memo", required: true}), "What the fine is for.")],
      send: async (d, el) => {
        await post("/v1/treasury/fines", {cid: String(d.get("cid")), amount: Number(d.get("amount")), memo: d.get("memo")});
        el.reset();
        return "Fined.";
      }})));

  const threshold = ctx.live(["settings"], async () => {
    const {payments} = await get("/v1/settings");
    return h("p", {"data-testid": "approve-over"}, payments.approve_over === 0
      ? "Every payment waits for you in Approvals (the threshold is 0)."
      : `A payment of ${fmt.credits(payments.approve_over)} or less moves at once; a larger one waits for you in Approvals.`);
  }, {label: "The approval threshold"});
  const payments = card("Payments", threshold, form({label: "Approval threshold", submit: "Save threshold",
    fields: [field("Approval threshold (credits)", h("input", {name: "approve_over", type: "number", min: 0, step: 1,
      required: true}), "payments.approve_over: the default is 500; 0 makes every payment wait.")],
    send: async (d, el) => {
      const out = await patch("/v1/settings", {payments: {approve_over: Number(d.get("approve_over"))}});
      el.reset();
      return out;
    },
    done: (out) => `Saved: the threshold is ${fmt.credits(out.payments.approve_over)}.`}));

  const wallets = ctx.live(["treasury"], async () => {
    const {wallets: rows} = await get("/v1/treasury/wallets");
    return table([{label: "Agent", value: (w) => `${w.name || ""} (${w.cid})`, sort: (w) => w.name || w.cid},
      {label: "Role", value: (w) => w.role || "—", sort: (w) => w.role},
      {label: "Balance", value: (w) => money(w.balance), sort: (w) => w.balance},
      {label: "Earned", value: (w) => money(w.earned), sort: (w) => w.earned},
      {label: "Spent", value: (w) => money(w.spent), sort: (w) => w.spent},
      {label: "Share", value: (w) => w.share, sort: (w) => parseFloat(w.share)}], rows,
    {sortable: true, empty: "No wallets yet: an agent gets one when it is spawned.", label: "Wallets"});
  }, {label: "Wallets"});

  const kind = select("kind", [["", "Every kind"], ...JOURNAL_KINDS.map((k) => [k, k])], "");
  const wallet = h("input", {name: "wallet", size: 8, placeholder: "CID"});
  const task = h("input", {name: "task", size: 6, placeholder: "t1"});
  let older = [];
  let before = null;
  const filters = () => ({kind: kind.value, wallet: wallet.value.trim(), task: task.value.trim(), limit: JOURNAL_PAGE});
  const journal = ctx.live(["treasury"], async () => {
    let page = await get("/v1/treasury/journal", filters());
    let entries = page.entries;
    // With older entries loaded, the newest page is read down to them: entries that arrived since push
    // the page's last ones past its end, and those are shown too, not skipped.
    const joined = older.length ? older[0].position : null;
    while (joined !== null && page.older !== null && page.older > joined) {
      page = await get("/v1/treasury/journal", {...filters(), before: page.older});
      entries = entries.concat(page.entries);
    }
    if (!older.length) before = page.older;
    const seen = new Set(entries.map((e) => e.id));
    return journalTable([...entries, ...older.filter((e) => !seen.has(e.id))]);
  }, {label: "Journal"});
  const loadOlder = h("button", {type: "button", onclick: async () => {
    if (before === null) { loadOlder.textContent = "No older entries"; return; }
    const page = await get("/v1/treasury/journal", {...filters(), before});
    older = [...older, ...page.entries];
    before = page.older;
    journal.reload();
  }}, "Load older");
  for (const el of [kind, wallet, task]) el.addEventListener("change", () => { older = []; journal.reload(); });

  const chart = ctx.live(["treasury"], async () => {
    const by = range.value !== "0" && Number(range.value) <= 168 ? "hour" : "day";
    const {series} = await get("/v1/treasury/series", {by, from: since()});
    return [balanceChart(series), table([{label: by === "hour" ? "Hour" : "Day", value: (r) => r.at},
      {label: "Budget", value: (r) => money(r.budget)}, {label: "Wallets", value: (r) => money(r.wallets)},
      {label: "Escrows", value: (r) => money(r.escrows)}, {label: "Minted", value: (r) => fmt.n(r.minted)},
      {label: "Paid", value: (r) => fmt.n(r.paid)}], series, {label: "Balances over time"})];
  }, {label: "Balances over time"});

  view.append(h("div", {class: "row"}, h("label", {for: "tr-range"}, "Range"), range), totals, buttons, payments,
    card("Wallets", wallets),
    card("Journal", h("div", {class: "row"}, field("Kind", kind), field("Wallet", wallet), field("Task", task)), journal, loadOlder),
    card("Balances over time", chart));
}

function journalTable(entries) {
  return table([{label: "When", value: (e) => fmt.time(e.at)}, {label: "Kind", value: (e) => e.kind},
    {label: "Postings", value: (e) => Object.entries(e.postings).map(([acct, n]) => h("div", {}, `${acct} ${n > 0 ? "+" : ""}${fmt.n(n)}`))},
    {label: "Amount", value: (e) => money(e.amount)}, {label: "Memo", value: (e) => e.memo || ""},
    {label: "Task", value: (e) => e.task || ""}], entries, {empty: "No entries match.", label: "Journal entries", page: Infinity});
}

// The budget over time, drawn as an SVG line (no script library).
function balanceChart(series) {
  if (series.length < 2) return h("p", {class: "empty"}, "The chart needs two or more periods.");
  const W = 600, H = 120;
  const max = Math.max(...series.map((r) => r.budget), 1);
  const pts = series.map((r, i) => `${(i / (series.length - 1)) * W},${H - (r.budget / max) * (H - 10)}`).join(" ");
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `The plaza budget over ${series.length} periods, from ${fmt.n(series[0].budget)} to ${fmt.n(series.at(-1).budget)} credits`);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", pts);
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#0b5fcc");
  line.setAttribute("stroke-width", "2");
  svg.append(line);
  return svg;
}
