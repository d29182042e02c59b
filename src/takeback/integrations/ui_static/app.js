// takeback ui: the timeline, the diffs, and taking back, over the server's small JSON API.
// Every action is the library's: the page plans (dry run), asks, then does.
"use strict";

const TOKEN = document.querySelector('meta[name="takeback-token"]').content;
const $ = (sel) => document.querySelector(sel);

const state = {
  session: null,
  timeline: null,
  selected: null, // {kind: "turn", n} | {kind: "step", n} | {kind: "compare", from, to}
  view: localStorage.getItem("takeback.view") || "unified",
  known: new Set(),
};

// -- helpers ----------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// replaceChildren, leaving out what a condition left null
function put(el, ...kids) {
  el.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined) q.set(k, v);
  const res = await fetch(`${path}?${q}`, { headers: { "X-Takeback-Token": TOKEN } });
  return answer(res);
}

async function post(path, body) {
  const res = await fetch(path, {
    method: "POST",
    headers: { "X-Takeback-Token": TOKEN, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return answer(res);
}

async function answer(res) {
  let doc;
  try { doc = await res.json(); } catch { doc = { message: `${res.status} ${res.statusText}` }; }
  if (!res.ok) {
    const err = new Error(doc.message || "request failed");
    err.doc = doc;
    err.status = res.status;
    throw err;
  }
  return doc;
}

function when(t) {
  if (!t) return "";
  const d = new Date(t * 1000);
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return today ? time : `${d.toLocaleDateString()} ${time}`;
}

const short = (id) => (id ? id.slice(0, 10) : "");
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

function stat(files, added, removed) {
  return h("span", { class: "stat" }, `${plural(files, "file")} changed `,
    h("span", { class: "add" }, `+${added}`), " ", h("span", { class: "del" }, `-${removed}`));
}

// -- timeline ---------------------------------------------------------------------------

async function loadTimeline() {
  const tl = await api("/api/timeline", { session: state.session });
  state.timeline = tl;
  // Hold on to the server's choice only once it is a recorded session: a store made a
  // moment ago has none yet, and its first session is the one to follow.
  if (!state.session && tl.session && tl.sessions.some((s) => s.name === tl.session)) {
    state.session = tl.session;
  }
  $("#root").textContent = tl.root;
  const sel = $("#session");
  put(sel, ...tl.sessions.map((s) =>
    h("option", { value: s.name, selected: s.name === tl.session, title: s.name },
      (s.label || s.name) + (s.name === tl.active ? " (latest)" : ""))));
  // Redo and Unrevert act on this session's last undo or revert: offered only when
  // there is one (the same rule as the command line's).
  const redo = $("#redo");
  const unrevert = $("#unrevert");
  redo.disabled = !tl.can_redo;
  unrevert.disabled = !tl.can_unrevert;
  redo.title = tl.can_redo ? "bring back what the last undo took back" : "nothing to redo: no undo to bring back";
  unrevert.title = tl.can_unrevert ? "put back what the last revert took back" : "nothing to unrevert: no revert to put back";
  renderTimeline();
}

function renderTimeline() {
  const tl = state.timeline;
  const box = $("#timeline");
  if (!tl.store) {
    put(box, h("div", { class: "empty" }, "Nothing recorded in this folder yet."));
    return;
  }
  const items = [];
  for (const t of tl.turns) items.push({ at: t.created_at || 0, el: turnEntry(t), key: `turn:${t.turn}` });
  for (const tb of tl.takebacks) items.push({ at: tb.created_at, el: takebackEntry(tb), key: `op:${tb.pre}` });
  for (const st of tl.loose_steps) {
    items.push({ at: st.created_at || 0, key: `step:${st.n}`,
      el: h("div", { class: "entry loose" }, h("ul", { class: "steps" }, stepRow(st))) });
  }
  items.sort((a, b) => b.at - a.at);
  const first = state.known.size === 0;
  for (const it of items) {
    if (!first && !state.known.has(it.key)) it.el.classList.add("new");
    state.known.add(it.key);
  }
  const start = h("div", { class: "entry start" },
    h("div", { class: "head" }, h("span", { class: "title" }, "Session started")),
    h("div", { class: "meta" }, h("span", {}, `baseline ${short(tl.baseline)}`),
      h("button", { class: "small ghost", onclick: (e) => { e.stopPropagation(); planRewind("start", "the session's start"); } }, "Rewind to start")));
  put(box, ...items.map((i) => i.el), start);
}

function turnEntry(t) {
  const sel = state.selected;
  const selected = sel && sel.kind === "turn" && sel.n === t.turn;
  const el = h("div", {
    class: `entry turn ${t.state}${selected ? " selected" : ""}`,
    dataset: { turn: t.turn },
    onclick: () => select({ kind: "turn", n: t.turn }),
  },
  h("div", { class: "head" },
    h("span", { class: "title" }, `Turn ${t.turn}`),
    h("span", { class: `badge ${t.state}` }, t.state),
    h("span", { class: "spacer" }),
    h("span", { class: "meta" }, when(t.created_at))),
  t.label ? h("div", { class: "label" }, t.label) : null,
  h("div", { class: "meta" }, t.state === "open" ? h("span", {}, "in progress") : stat(t.files, t.added, t.removed)));
  if (t.steps.length) {
    el.append(h("ul", { class: "steps" }, t.steps.map((s) => stepRow(s))));
  }
  return el;
}

function stepRow(s) {
  const sel = state.selected;
  const selected = sel && sel.kind === "step" && sel.n === s.n;
  return h("li", {
    class: `step${selected ? " selected" : ""}`,
    dataset: { step: s.n },
    title: s.label,
    onclick: (e) => { e.stopPropagation(); select({ kind: "step", n: s.n }); },
  },
  h("span", { class: "num" }, `step ${s.n}`),
  s.command
    ? h("span", { class: "what cmd" }, `$ ${s.label || "(command)"}`)
    : h("span", { class: "what" }, s.label || "file edits"),
  s.exit_code ? h("span", { class: "exit" }, `exit ${s.exit_code}`) : null);
}

const OP_NAMES = {
  undo: "Undo", "undo-file": "Undo of one file", redo: "Redo", revert: "Revert",
  "revert-move": "Revert moved", unrevert: "Unrevert", rewind: "Rewind",
};
const OP_STATES = { redone: "redone", unreverted: "unreverted" };

function takebackEntry(tb) {
  return h("div", { class: "entry takeback", dataset: { op: tb.op } },
    h("div", { class: "head" },
      h("span", { class: "title" }, `\u21b6 ${OP_NAMES[tb.op] || tb.op}`),
      OP_STATES[tb.state] ? h("span", { class: "badge" }, OP_STATES[tb.state]) : null,
      h("span", { class: "spacer" }),
      h("span", { class: "meta" }, when(tb.created_at))),
    h("div", { class: "meta" }, h("span", {}, tb.message),
      h("button", {
        class: "small ghost", title: "put the workspace back as it was before this",
        onclick: () => planRewind(tb.pre, `before this ${tb.op}`),
      }, `Take back (${short(tb.pre)})`)));
}

function select(what) {
  state.selected = what;
  renderTimeline();
  renderDetail();
}

// -- detail: a turn, a step, or two points ------------------------------------------------

async function renderDetail() {
  const sel = state.selected;
  const detail = $("#detail");
  if (!sel) return;
  // Drawn aside and shown only if still wanted: a slower answer for an earlier click
  // never replaces a later one, and the last view's buttons are inert meanwhile.
  const mine = ++renderSeq;
  const key = JSON.stringify(sel);
  if (key !== shownKey) detail.classList.add("loading");
  const box = document.createElement("div");
  try {
    if (sel.kind === "turn") await renderTurn(box, sel.n);
    else if (sel.kind === "step") await renderStep(box, sel.n);
    else await renderCompare(box, sel.from, sel.to);
  } catch (err) {
    put(box, h("div", { class: "error" }, err.message));
  }
  if (mine !== renderSeq) return;
  const scroll = key === shownKey ? detail.scrollTop : 0;
  put(detail, ...box.childNodes);
  detail.scrollTop = scroll;
  detail.classList.remove("loading");
  shownKey = key;
}

let renderSeq = 0;
let shownKey = null;

async function renderTurn(box, n) {
  const t = state.timeline.turns.find((x) => x.turn === n);
  if (!t) { put(box, h("div", { class: "empty" }, `No turn ${n}.`)); return; }
  const head = h("div", { class: "detail-head" }, h("h1", {}, `Turn ${n}`),
    h("span", { class: `badge ${t.state}` }, t.state), h("span", { class: "meta" }, when(t.created_at)));
  if (t.state === "open") {
    put(box, head, h("p", { class: "sub" }, t.label || ""),
      h("div", { class: "warnbox" }, "This turn is still open: its change list is made when it ends."));
    return;
  }
  const d = await api("/api/turn", { session: state.session, turn: n });
  const actions = h("div", { class: "actions" },
    h("button", { class: "primary", dataset: { action: "undo-turn" }, disabled: t.state !== "done",
      onclick: () => plan({ op: "undo", turn: n }, `Undo turn ${n}`) }, `Undo turn ${n}`),
    h("button", { dataset: { action: "revert" },
      onclick: () => plan({ op: "revert", to_turn: n }, `Revert to turn ${n}`),
      title: `take back every turn after turn ${n}` }, `Revert to after turn ${n}`),
    h("button", { dataset: { action: "rewind-turn" },
      onclick: () => planRewind(`turn:${n}`, `before turn ${n}`) }, `Rewind to before turn ${n}`));
  const list = h("div", { class: "filelist" }, t.changes.map((c) => h("div", { class: "filerow" },
    h("span", { class: `status ${c.status}` }, c.status),
    h("span", { class: "path" }, c.path),
    h("span", { class: "stat" }, h("span", { class: "add" }, `+${c.added}`), " ", h("span", { class: "del" }, `-${c.removed}`)),
    c.undoable ? null : h("span", { class: "meta" }, "not kept: over the size limit"),
    h("button", { class: "small", disabled: !c.undoable || t.state !== "done", dataset: { action: "undo-file", path: c.path },
      onclick: () => plan({ op: "undo-turn-file", turn: n, file: c.path }, `Undo ${c.path} of turn ${n}`) }, "Undo file"))));
  put(box, head, h("p", { class: "sub" }, t.label || "(no label)", " \u00b7 ", stat(t.files, t.added, t.removed)),
    actions, t.changes.length ? list : h("div", { class: "note" }, "This turn changed nothing."),
    viewToggle(), ...diffFiles(d.files, `turn:${n}`, null, true,
      t.state === "done" ? (path, k) => plan({ op: "undo-hunk", turn: n, hunk: `${path}#${k}` },
        `Undo hunk ${k} of ${path} (turn ${n})`) : null));
}

async function renderStep(box, n) {
  const pts = await api("/api/step", { session: state.session, step: n });
  const step = allSteps().find((s) => s.n === n);
  const d = await api("/api/diff", { session: state.session, from: pts.from, to: pts.to });
  const head = h("div", { class: "detail-head" }, h("h1", {}, `Step ${n}`),
    step && step.command ? h("code", {}, `$ ${step.label}`) : h("span", {}, step ? step.label || "file edits" : ""));
  put(box, head,
    h("p", { class: "sub" }, `from ${short(pts.from)} (before step ${n}) to ${pts.to ? short(pts.to) : "the files now"}`,
      " \u00b7 ", stat(d.files.length, d.added, d.removed)),
    h("div", { class: "actions" },
      h("button", { dataset: { action: "rewind-step" }, onclick: () => planRewind(String(n), `before step ${n}`) }, `Rewind to before step ${n}`)),
    viewToggle(), ...diffFiles(d.files, pts.from, pts.to));
}

function pointOptions(selectedRef, withNow) {
  const tl = state.timeline;
  const opts = [h("option", { value: "start", selected: selectedRef === "start" }, "start (the session's baseline)")];
  for (const p of tl.points) {
    if (p.kind === "baseline") continue;
    const what = p.kind === "turn" ? `before turn ${turnOf(p.ref) ?? ""}` : p.kind === "step" ? `before step ${stepOf(p.ref) ?? ""}` :
      p.kind === "step-after" ? `after step ${stepAfterOf(p.ref) ?? ""}` : p.message || p.kind;
    opts.push(h("option", { value: p.ref, selected: selectedRef === p.ref }, `${when(p.created_at)} \u00b7 ${what} \u00b7 ${short(p.ref)}`));
  }
  if (withNow) opts.push(h("option", { value: "", selected: !selectedRef }, "the files now"));
  return opts;
}

const allSteps = () => state.timeline.turns.flatMap((t) => t.steps).concat(state.timeline.loose_steps);
const turnOf = (ref) => { const t = state.timeline.turns.find((x) => x.before === ref); return t ? t.turn : null; };
const stepOf = (ref) => { const s = allSteps().find((x) => x.before === ref); return s ? s.n : null; };
const stepAfterOf = (ref) => { const s = allSteps().find((x) => x.after === ref); return s ? s.n : null; };

async function renderCompare(box, from, to) {
  const fromSel = h("select", { id: "compare-from" }, pointOptions(from, false));
  const toSel = h("select", { id: "compare-to" }, pointOptions(to, true));
  const go = () => select({ kind: "compare", from: fromSel.value, to: toSel.value || null });
  fromSel.addEventListener("change", go);
  toSel.addEventListener("change", go);
  const d = await api("/api/diff", { session: state.session, from, to });
  put(box, h("div", { class: "detail-head" }, h("h1", {}, "Compare two points")),
    h("div", { class: "compare" }, h("label", { class: "field" }, "from", fromSel), h("label", { class: "field" }, "to", toSel)),
    h("p", { class: "sub" }, stat(d.files.length, d.added, d.removed)),
    viewToggle(), ...diffFiles(d.files, from, to));
}

function viewToggle() {
  const mk = (v, label) => h("button", { type: "button", class: state.view === v ? "on" : "", dataset: { view: v },
    onclick: () => { state.view = v; localStorage.setItem("takeback.view", v); renderDetail(); } }, label);
  return h("div", { class: "actions" }, h("span", { class: "seg" }, mk("unified", "Unified"), mk("split", "Side by side")));
}

// -- diffs --------------------------------------------------------------------------------

// onHunk(path, k): each hunk of a file gets a control that takes back that hunk alone.
function diffFiles(files, fromRef, toRef, points = true, onHunk = null) {
  if (!files.length) return [h("div", { class: "note" }, "No files differ.")];
  return files.map((f) => {
    const bar = h("div", { class: "file-bar" },
      h("span", { class: `status ${f.status}` }, f.status),
      h("span", { class: "path" }, f.path),
      h("span", { class: "stat" }, h("span", { class: "add" }, `+${f.added}`), " ", h("span", { class: "del" }, `-${f.removed}`)),
      points && f.status !== "A" ? h("button", { class: "small ghost", onclick: () => showFile(f.path, fromRef) }, "before") : null,
      points && f.status !== "D" && toRef ? h("button", { class: "small ghost", onclick: () => showFile(f.path, toRef) }, "after") : null);
    let body;
    if (f.over_limit) body = h("div", { class: "note" }, "Over the size limit: not kept, so no diff.");
    else if (f.unreadable) body = h("div", { class: "note" }, "Unreadable when the snapshot was taken: no diff.");
    else if (f.binary) body = h("div", { class: "note" }, "Binary files differ.");
    else if (f.too_large) body = h("div", { class: "note" }, "This diff is too large to show here (use takeback diff).");
    else {
      const hunkCtl = onHunk ? (k) => onHunk(f.path, k) : null;
      body = state.view === "split" ? splitTable(parsePatch(f.patch), hunkCtl) : unifiedTable(parsePatch(f.patch), hunkCtl);
    }
    return h("div", { class: "file", dataset: { path: f.path } }, bar, body);
  });
}

// A merge's preview (one git-style patch of every merged file) as the page's diff files.
function previewFiles(text) {
  const files = [];
  for (const part of text.split(/^(?=diff --git )/m)) {
    if (!part.startsWith("diff --git ")) continue;
    const m = /^\+\+\+ b\/(.*)$/m.exec(part) || /^diff --git a\/(.*) b\//.exec(part);
    let added = 0;
    let removed = 0;
    let inHunk = false;
    for (const line of part.split("\n")) {
      if (line.startsWith("@@")) inHunk = true;
      else if (inHunk && line.startsWith("+")) added++;
      else if (inHunk && line.startsWith("-")) removed++;
    }
    files.push({ path: m ? m[1] : "", status: "M", added, removed, patch: part });
  }
  return files;
}

// The regions of a file both sides changed, by their lines (first and last, 1-based; an
// empty range [n + 1, n] is "after line n").
function regionTable(path, regions) {
  const span = (r) => (r[1] < r[0] ? `none (after line ${r[1]})` : r[0] === r[1] ? `line ${r[0]}` : `lines ${r[0]}\u2013${r[1]}`);
  return h("table", { class: "regions", dataset: { path } },
    h("thead", {}, h("tr", {}, h("th", {}, "region"), h("th", {}, "now"), h("th", {}, "in the record"), h("th", {}, "to write"))),
    h("tbody", {}, regions.map((r, i) => h("tr", {}, h("td", {}, String(i + 1)),
      h("td", {}, span(r.now)), h("td", {}, span(r.record)), h("td", {}, span(r.target))))));
}

function parsePatch(text) {
  const hunks = [];
  const notes = [];
  let cur = null;
  let a = 0;
  let b = 0;
  for (const line of text.split("\n")) {
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/.exec(line);
    if (m) {
      a = Number(m[1]); b = Number(m[2]);
      cur = { header: line, lines: [] };
      hunks.push(cur);
    } else if (!cur) {
      if (/^(new file|deleted file|old mode|new mode)/.test(line)) notes.push(line);
    } else if (line.startsWith("+")) {
      cur.lines.push({ t: "add", b: b++, text: line.slice(1) });
    } else if (line.startsWith("-")) {
      cur.lines.push({ t: "del", a: a++, text: line.slice(1) });
    } else if (line.startsWith(" ")) {
      cur.lines.push({ t: "ctx", a: a++, b: b++, text: line.slice(1) });
    } else if (line.startsWith("\\")) {
      cur.lines.push({ t: "meta", text: line });
    }
  }
  return { hunks, notes };
}

// A hunk's header row; with onHunk(k), a button that takes back hunk k (from 1).
function hunkHeader(hk, k, onHunk) {
  const ctl = onHunk ? h("button", { class: "small ghost hunk-undo", dataset: { action: "undo-hunk", hunk: String(k) },
    onclick: () => onHunk(k) }, "Undo hunk") : null;
  return h("tr", { class: "hunk" }, h("td", { colspan: 4 }, hk.header, ctl ? " " : "", ctl));
}

function unifiedTable(p, onHunk = null) {
  const rows = [];
  for (const [i, hk] of p.hunks.entries()) {
    rows.push(hunkHeader(hk, i + 1, onHunk));
    for (const l of hk.lines) {
      if (l.t === "meta") { rows.push(h("tr", {}, h("td", { class: "ln" }), h("td", { class: "ln" }), h("td", { class: "sign" }), h("td", { class: "code" }, l.text))); continue; }
      const cls = l.t === "ctx" ? "" : l.t;
      rows.push(h("tr", {},
        h("td", { class: `ln ${cls}` }, l.a ?? ""), h("td", { class: `ln ${cls}` }, l.b ?? ""),
        h("td", { class: `sign ${cls}` }, l.t === "add" ? "+" : l.t === "del" ? "-" : " "),
        h("td", { class: `code ${cls}` }, l.text)));
    }
  }
  return wrapTable(p, rows, "unified");
}

function splitTable(p, onHunk = null) {
  const rows = [];
  for (const [i, hk] of p.hunks.entries()) {
    rows.push(hunkHeader(hk, i + 1, onHunk));
    let dels = [];
    let adds = [];
    const flush = () => {
      const n = Math.max(dels.length, adds.length);
      for (let i = 0; i < n; i++) {
        const l = dels[i];
        const r = adds[i];
        rows.push(h("tr", {},
          h("td", { class: `ln ${l ? "del" : "blank"}` }, l ? l.a : ""), h("td", { class: `code ${l ? "del" : "blank"}` }, l ? l.text : ""),
          h("td", { class: `ln mid ${r ? "add" : "blank"}` }, r ? r.b : ""), h("td", { class: `code ${r ? "add" : "blank"}` }, r ? r.text : "")));
      }
      dels = []; adds = [];
    };
    for (const l of hk.lines) {
      if (l.t === "del") dels.push(l);
      else if (l.t === "add") adds.push(l);
      else {
        flush();
        if (l.t === "ctx") {
          rows.push(h("tr", {}, h("td", { class: "ln" }, l.a), h("td", { class: "code" }, l.text),
            h("td", { class: "ln mid" }, l.b), h("td", { class: "code" }, l.text)));
        }
      }
    }
    flush();
  }
  return wrapTable(p, rows, "split");
}

function wrapTable(p, rows, kind) {
  const notes = p.notes.length ? h("div", { class: "note" }, p.notes.join(" \u00b7 ")) : null;
  if (!rows.length) return notes || h("div", { class: "note" }, "No line differs (the mode or an empty file).");
  const cols = kind === "split" ? ["ln", "code", "ln", "code"] : ["ln", "ln", "sign", "code"];
  return h("div", {}, notes, h("table", { class: `diff ${kind}` },
    h("colgroup", {}, cols.map((c) => h("col", { class: `col-${c}` }))), h("tbody", {}, rows)));
}

// -- a file's whole text at a point ---------------------------------------------------------

async function showFile(path, ref) {
  const dlg = $("#file-dialog");
  $("#file-title").textContent = path;
  const sel = $("#file-point");
  put(sel, ...pointOptions(ref, false));
  sel.onchange = () => loadFile(path, sel.value);
  if (!dlg.open) dlg.showModal();
  await loadFile(path, ref);
}

async function loadFile(path, ref) {
  const body = $("#file-body");
  put(body, h("div", { class: "note" }, "Loading\u2026"));
  try {
    const f = await api("/api/show", { session: state.session, ref, path });
    if (f.binary) { put(body, h("div", { class: "note" }, `Binary file, ${f.size} bytes.`)); return; }
    const lines = f.text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    put(body, h("table", { class: "diff" },
      h("colgroup", {}, h("col", { class: "col-ln" }), h("col", { class: "col-code" })), h("tbody", {}, lines.map((l, i) =>
      h("tr", {}, h("td", { class: "ln" }, i + 1), h("td", { class: "code" }, l))))),
    f.truncated ? h("div", { class: "note" }, "Cut here: the file is larger.") : null);
  } catch (err) {
    put(body, h("div", { class: "note" }, err.message));
  }
}

// -- taking back: plan, confirm, result ------------------------------------------------------

let pending = null;

function planRewind(ref, what) {
  return plan({ op: "rewind", ref }, `Rewind to ${what}`);
}

async function plan(args, title) {
  pending = { args: { ...args, session: state.session }, title };
  $("#force").checked = false;
  $("#merge").checked = false;
  await showPlan();
  const dlg = $("#plan-dialog");
  if (!dlg.open) dlg.showModal();
}

async function showPlan() {
  const { args, title } = pending;
  const force = $("#force").checked;
  const merge = $("#merge").checked;
  $("#plan-title").textContent = title;
  const body = $("#plan-body");
  const confirm = $("#plan-confirm");
  confirm.hidden = false;
  confirm.disabled = true;
  confirm.textContent = "Confirm";
  $("#plan-cancel").textContent = "Cancel";
  put(body, h("div", { class: "note" }, "Planning\u2026"));
  let p;
  try {
    p = await post("/api/plan", { ...args, force, merge });
  } catch (err) {
    put(body, h("div", { class: "error" }, err.message));
    $("#resolve").hidden = true;
    confirm.hidden = true;
    return;
  }
  pending.plan = p;
  if (args.op === "rewind") pending.args.ref = p.target; // exactly the state planned
  if (args.op === "undo" && !args.turn && p.turns.length) pending.args.turn = p.turns[0];
  const parts = [h("div", { class: "summary", id: "plan-summary" }, p.summary)];
  const rows = planRows(p);
  if (rows.length) parts.push(h("ul", { class: "plan-list", id: "plan-list" }, rows));
  const conflicts = p.conflicts || [];
  if (conflicts.length) {
    const regions = p.regions || {};
    parts.push(h("div", { class: "conflicts", id: "plan-conflicts" },
      h("strong", {}, force ? "These changed since, and will be overwritten (the snapshot taken first keeps them):" :
        merge ? "These cannot be merged, so nothing will be written:" :
        "Conflicts: these changed since, so nothing will be written:"),
      h("ul", {}, conflicts.map((c) => h("li", {}, (p.why && p.why[c]) || c,
        (regions[c] || []).length ? regionTable(c, regions[c]) : null)))));
  }
  const merged = p.merged || [];
  if (merged.length) {
    parts.push(h("div", { class: "okbox", id: "plan-merged" },
      h("strong", {}, conflicts.length ? "These would merge (the operation's hunks taken back, the edits made since kept):" :
        "Merged: the operation's hunks taken back, the edits made since kept:"),
      h("ul", {}, merged.map((m) => h("li", {}, m)))));
  }
  if (p.preview && !conflicts.length) {
    parts.push(h("div", { class: "preview", id: "plan-preview" },
      h("div", { class: "preview-title" }, "What the merge would write (from the file now):"),
      ...diffFiles(previewFiles(p.preview), null, null, false)));
  }
  const left = Object.entries(p.left || {});
  if (left.length) parts.push(h("div", { class: "warnbox" }, h("strong", {}, "Left as they are: "), left.map(([k, v]) => `${k} (${v})`).join("; ")));
  if ((p.not_restored || []).length) parts.push(h("div", { class: "warnbox" }, "Not restored (never kept): ", p.not_restored.join(", ")));
  const nothing = p.nothing || (p.op === "rewind" ? !p.plan.length : !(p.restored || []).length && !conflicts.length);
  if (!nothing && (!conflicts.length || force)) parts.push(h("p", { class: "sub" }, "A snapshot is taken before anything is written, so this can itself be taken back."));
  put(body, ...parts);
  // Merge and force are the two ways past a conflict, as on the command line: offered
  // while the plan has conflicts (or one is chosen), and never both at once.
  const offer = conflicts.length > 0 || force || merge;
  $("#resolve").hidden = !offer;
  $("#merge-label").hidden = !offer || p.op === "rewind";
  confirm.disabled = nothing || (conflicts.length > 0 && !force);
  confirm.textContent = merge && merged.length ? "Confirm the merge" : "Confirm";
  confirm.hidden = nothing;
  if (nothing) $("#plan-cancel").textContent = "Close";
}

// A plan's letters say what changed since the target (M, A created since, D deleted
// since); the header above each group says what will happen to them, in the words the
// command line prints ("would restore", "would remove", "would recreate").
const EFFECT_OF = { M: "restore", A: "remove", D: "recreate" };
const SINCE = { M: "changed since", A: "created since", D: "deleted since" };

function planRows(p) {
  const rows = p.op === "rewind"
    ? p.plan.map((i) => [i.effect || EFFECT_OF[i.action], i.action, i.path])
    : (p.restored || []).map((path) => {
      const key = path.replace(/\/$/, "");
      const a = (p.actions || {})[key] || "M";
      return [(p.effects || {})[key] || EFFECT_OF[a], a, path];
    });
  const out = [];
  for (const effect of ["restore", "remove", "recreate"]) {
    const group = rows.filter((r) => r[0] === effect);
    if (!group.length) continue;
    out.push(h("li", { class: "plan-head", dataset: { effect } }, `Would ${effect}`));
    for (const [, a, path] of group) {
      out.push(h("li", {}, h("span", { class: `status ${a}` }, a), h("span", {}, path),
        h("span", { class: "why" }, SINCE[a])));
    }
  }
  return out;
}

async function confirmPlan() {
  const body = $("#plan-body");
  const confirm = $("#plan-confirm");
  confirm.disabled = true;
  let r;
  try {
    r = await post("/api/apply", { ...pending.args, plan: pending.plan && pending.plan.token,
      force: $("#force").checked, merge: $("#merge").checked });
  } catch (err) {
    const doc = err.doc || {};
    if (doc.error === "StalePlanError") {
      // The workspace or the history moved since the plan shown: nothing was written.
      // Show the plan as it is now, for the person to confirm again (or not).
      await showPlan();
      $("#plan-body").prepend(h("div", { class: "warnbox", id: "plan-stale" },
        `${doc.message}. This is the plan now.`));
      await refresh();
      return;
    }
    put(body, h("div", { class: "error", id: "apply-error" }, doc.message || err.message));
    confirm.hidden = true;
    $("#plan-cancel").textContent = "Close";
    await refresh();
    return;
  }
  const pre = r.pre || r.pre_rewind;
  put(body,
    h("div", { class: "okbox", id: "apply-result" }, r.summary),
    (r.restored || []).length ? h("ul", { class: "plan-list" }, r.restored.map((p) =>
      h("li", {}, p, (r.merged || []).includes(p) ? h("span", { class: "why" }, "merged: edits made since kept") : null))) : null,
    pre ? h("p", {}, "To take this back: ", h("span", { class: "takeback-id", id: "takeback-id" }, short(pre)), " ",
      h("code", {}, `takeback rewind --to ${short(pre)}`), " ",
      h("button", { class: "small", onclick: () => planRewind(pre, `before this ${r.op}`) }, "Take it back")) : null);
  confirm.hidden = true;
  $("#resolve").hidden = true;
  $("#plan-cancel").textContent = "Close";
  await refresh();
}

// -- live ------------------------------------------------------------------------------------

let refreshing = null;
let again = false;

async function refresh() {
  if (refreshing) { again = true; return refreshing; }
  refreshing = (async () => {
    do {
      again = false;
      try {
        await loadTimeline();
        if (state.selected && state.selected.kind !== "compare") await renderDetail();
      } catch (err) {
        put($("#timeline"), h("div", { class: "error" }, err.message));
        setTimeout(refresh, 1500); // a store busy or briefly unreadable: look again
      }
    } while (again);
  })();
  try { await refreshing; } finally { refreshing = null; }
}

function follow() {
  const live = $("#live");
  const es = new EventSource(`/api/events?token=${encodeURIComponent(TOKEN)}`);
  es.addEventListener("open", () => { live.classList.add("on"); live.classList.remove("off"); });
  es.addEventListener("error", () => { live.classList.remove("on"); live.classList.add("off"); });
  es.addEventListener("update", () => {
    live.classList.add("flash");
    setTimeout(() => live.classList.remove("flash"), 400);
    refresh();
  });
}

// -- wiring ------------------------------------------------------------------------------------

$("#session").addEventListener("change", (e) => {
  state.session = e.target.value;
  state.selected = null;
  state.known = new Set();
  put($("#detail"), h("div", { class: "empty" }, "Pick a turn or a step on the left to see what it changed."));
  refresh();
});
$("#compare-open").addEventListener("click", () => {
  const tl = state.timeline;
  if (!tl || !tl.store) return;
  const last = tl.points.length ? tl.points[tl.points.length - 1].ref : null;
  select({ kind: "compare", from: "start", to: last });
});
$("#redo").addEventListener("click", () => plan({ op: "redo" }, "Redo"));
$("#unrevert").addEventListener("click", () => plan({ op: "unrevert" }, "Unrevert"));
$("#plan-cancel").addEventListener("click", () => $("#plan-dialog").close());
$("#plan-confirm").addEventListener("click", confirmPlan);
// Merge and force exclude each other (the library refuses both at once): ticking one
// unticks the other, and the plan is made again.
$("#force").addEventListener("change", () => { if ($("#force").checked) $("#merge").checked = false; showPlan(); });
$("#merge").addEventListener("change", () => { if ($("#merge").checked) $("#force").checked = false; showPlan(); });
$("#file-close").addEventListener("click", () => $("#file-dialog").close());

refresh().then(() => {
  const tl = state.timeline;
  if (!state.selected && tl && tl.turns && tl.turns.length) select({ kind: "turn", n: tl.turns[tl.turns.length - 1].turn });
});
follow();
