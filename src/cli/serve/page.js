// bert-explain explorer: asks the server's /api/explain for reports and draws them; nothing
// is fetched from anywhere else.
"use strict";

const $ = (id) => document.getElementById(id);
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
const state = {
  info: null, reports: [], texts: [], targets: [null, null], labels: [null, null],
  mixing: "attention", aggregation: "flow", layer: Infinity, generated: 0, heads: null, hidden: new Set(),
};
const causal = () => state.info && state.info.predicts === "text";
const classifier = () => state.info && state.info.predicts === "labels";

function el(tag, attributes, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svgEl(tag, attributes, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// White to dark blue, t in [0, 1].
function shade(t) {
  const x = Math.min(Math.max(Number.isFinite(t) ? t : 0, 0), 1);
  const c = [255 - 225 * x, 255 - 180 * x, 255 - 80 * x].map(Math.round);
  return { background: `rgb(${c.join(", ")})`, colour: x > 0.55 ? "#fff" : "#222" };
}

async function api(path, body) {
  const init = body === undefined ? {} :
    { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const response = await fetch(path, init);
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

// The request for pane i: its text and the page's options.
function request(i) {
  const body = { text: state.texts[i] };
  const mixing = [...document.querySelectorAll("#mixings input:checked")].map((c) => c.value);
  if (mixing.length > 0) body.mixing = mixing;
  if ($("lrp").checked) body.lrp = true;
  if (causal()) {
    body.generate = Number($("generate").value) || 5;
    if ($("causal-flow").checked) body.flow = true;
  } else {
    if (state.targets[i] !== null) body.target = state.targets[i];
    // A picked label is the one --evaluate scores and grad-attention differentiates.
    if (state.labels[i] !== null) {
      body.evaluate = true;
      delete body.lrp; // --evaluate includes LRP
      body.label = String(state.labels[i]);
      if (!(body.mixing || []).includes("grad-attention")) body.mixing = [...(body.mixing || []), "grad-attention"];
    }
    const candidates = $("candidates").value.trim();
    if (candidates && state.info.predicts === "words") body.candidates = candidates.split(",").map((c) => c.trim());
  }
  return body;
}

// Every map of a report: {mixing: {aggregation: rows}}; attention's raw is its "layer".
function maps(report) {
  const attention = {};
  for (const [name, rows] of Object.entries(report.relevance)) attention[name === "raw" ? "layer" : name] = rows;
  const out = { attention };
  for (const [name, m] of Object.entries(report.methods || {})) if (name !== "attention") out[name] = m;
  return out;
}

// The chosen map as layer × token rows ([L][n]; a causal report's for the chosen token).
function rows(report) {
  const m = maps(report)[state.mixing];
  const map = m && m[state.aggregation];
  if (!map) return null;
  if (report.mode !== "causal") return map;
  const perToken = map[Math.min(state.generated, map.length - 1)]; // [m][L]
  return perToken[0].map((_, l) => perToken.map((row) => row[l]));
}

function tokensOf(report) {
  return report.mode === "causal" ? report.prompt_tokens : report.tokens;
}

// The requests under way and each one's flow progress, {done, total} (null before any).
const running = new Map();
let requests = 0;

// The bar under the Explain button: every request under way's flows summed; no bar value
// (a moving bar) until a flow has begun. It appears only once a request has run for
// SHOW_AFTER ms, so an answer from the server's memory does not flash it.
const SHOW_AFTER = 250;
let showing = null;
function showProgress() {
  if (running.size === 0) {
    clearTimeout(showing);
    showing = null;
    $("working").hidden = true;
  } else if ($("working").hidden && showing === null) {
    showing = setTimeout(() => {
      showing = null;
      $("working").hidden = running.size === 0;
    }, SHOW_AFTER);
  }
  const counts = [...running.values()].filter((c) => c !== null);
  const done = counts.reduce((sum, c) => sum + c.done, 0);
  const total = counts.reduce((sum, c) => sum + c.total, 0);
  const bar = $("progress");
  if (total > 0) {
    bar.max = total;
    bar.value = done;
    $("progress-text").textContent = `${done}/${total} flows`;
  } else {
    bar.removeAttribute("value");
    $("progress-text").textContent = "explaining";
  }
}

// `task(id)` with the bar shown while it runs; `id` names its count in `running`.
async function whileWorking(task) {
  const id = requests++;
  running.set(id, null);
  showProgress();
  try {
    return await task(id);
  } finally {
    running.delete(id);
    showProgress();
  }
}

// The report of a request, its flows' progress drawn as /api/explain?progress streams it.
function explained(body) {
  return whileWorking(async (id) => {
    const response = await api("/api/explain?progress", body);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = JSON.parse(buffered.slice(0, end));
        buffered = buffered.slice(end + 1);
        if (line.progress) {
          running.set(id, line.progress);
          showProgress();
        } else if (line.report) {
          return line.report;
        } else {
          throw new Error(line.error);
        }
      }
    }
    throw new Error("the server ended its answer without a report");
  });
}

async function explainAll() {
  $("error").textContent = "";
  const compare = $("compare").checked;
  state.texts = [$("text-a").value, ...(compare ? [$("text-b").value] : [])];
  try {
    const reports = await Promise.all(state.texts.map((_, i) => explained(request(i))));
    state.reports = reports;
    state.generated = Math.min(state.generated, causal() ? reports[0].generated_tokens.length - 1 : 0);
    await loadHeads();
    draw();
  } catch (e) {
    $("error").textContent = e.message;
  }
}

async function explainPane(i) {
  try {
    state.reports[i] = await explained(request(i));
    draw();
  } catch (e) {
    $("error").textContent = e.message;
  }
}

function controls() {
  const report = state.reports[0];
  const all = maps(report);
  const mixing = $("mixing");
  mixing.replaceChildren(...Object.keys(all).map((m) => el("option", { value: m }, m)));
  if (!all[state.mixing]) state.mixing = "attention";
  mixing.value = state.mixing;
  const aggregation = $("aggregation");
  const names = Object.keys(all[state.mixing]);
  aggregation.replaceChildren(...names.map((a) => el("option", { value: a }, a)));
  if (!names.includes(state.aggregation)) state.aggregation = names.includes("flow") ? "flow" : names[0];
  aggregation.value = state.aggregation;
  const layer = $("layer");
  layer.max = report.layers;
  state.layer = Math.min(Math.max(state.layer, 1), report.layers);
  layer.value = state.layer;
  $("layer-value").textContent = `${state.layer} of ${report.layers}`;
}

function draw() {
  if (state.reports.length === 0) return;
  $("view").hidden = false;
  controls();
  const panes = state.reports.map((report, i) => pane(report, i));
  $("panes").replaceChildren(...panes);
  drawHeads();
  document.body.dataset.ready = "true";
}

function pane(report, i) {
  const box = el("div", { class: "pane", "data-pane": i });
  const grid = rows(report);
  const tokens = tokensOf(report);
  const values = grid ? grid[state.layer - 1] : tokens.map(() => 0);
  const top = Math.max(...values.filter(Number.isFinite), 1e-12);
  const line = el("div", { class: "tokens" });
  tokens.forEach((token, j) => {
    const span = el("span", { class: "token", "data-index": j, "data-value": values[j], title: values[j].toFixed(4) }, token);
    const c = shade(values[j] / top);
    span.style.background = c.background;
    span.style.color = c.colour;
    if (report.mode !== "causal") {
      if (j === report.target.index) span.classList.add("target");
      span.addEventListener("click", () => { state.targets[i] = j; explainPane(i); });
    }
    line.append(span);
  });
  if (report.mode === "causal") {
    report.generated_tokens.forEach((token, g) => {
      const span = el("span", { class: "token generated", "data-generated": g, title: "explain this generated token" }, token);
      if (g === state.generated) span.classList.add("target");
      span.addEventListener("click", () => { state.generated = g; draw(); });
      line.append(span);
    });
  }
  box.append(line, prediction(report, i), heatmap(report, grid, tokens), importance(report));
  return box;
}

// White at 0, to the info's first diverging end at 1 and its second at −1: signed
// importance scores, as the figure colours them.
function diverging(t) {
  const v = Math.min(Math.max(Number.isFinite(t) ? t : 0, -1), 1);
  const end = state.info.diverging[v >= 0 ? 0 : 1];
  return `rgb(${end.map((c) => Math.round(255 + (c - 255) * Math.abs(v))).join(", ")})`;
}

// With LRP (or a picked label's --evaluate): each headline importance score as a row over
// the tokens, each on its own scale (a causal report's for the chosen generated token, over
// the tokens fed at its step).
function importance(report) {
  const table = el("table", { class: "heatmap importance" });
  const causalReport = report.mode === "causal";
  const scored = causalReport ? (report.importance || [])[state.generated] : report.importance;
  if (!scored) return table;
  const tokens = causalReport
    ? [...report.prompt_tokens, ...report.generated_tokens.slice(0, state.generated)] : report.tokens;
  const head = el("tr");
  head.append(el("th"), ...tokens.map((t) => el("th", {}, t)));
  table.append(el("thead"));
  table.tHead.append(head);
  const body = el("tbody");
  for (const score of state.info.scores.filter((s) => Array.isArray(scored[s.name]))) {
    const values = scored[score.name];
    const largest = Math.max(...values.map(Math.abs), 1e-12);
    const tr = el("tr", { "data-score": score.name });
    tr.append(el("th", {}, score.label));
    values.forEach((v) => {
      const td = el("td", { title: v.toFixed(4), "data-value": v });
      td.style.background = score.signed ? diverging(v / largest) : shade(v / largest).background;
      tr.append(td);
    });
    body.append(tr);
  }
  table.append(body);
  return table;
}

function prediction(report, i) {
  const box = el("div", { class: "prediction" });
  if (report.mode === "causal") {
    box.append(el("p", {}, `Generated: ${report.generated_text}`));
    return box;
  }
  box.append(el("p", { class: "meta" }, `Explaining position ${report.target.index} “${report.target.token}”`));
  if (report.importance && classifier()) {
    box.append(el("p", { class: "meta explained-label" },
      `for the label “${report.importance.word}” (grad-attention and the importance scores follow the label; attention's maps do not depend on it)`));
  }
  for (const [group, entries] of Object.entries(report.prediction || {})) {
    if (!Array.isArray(entries)) continue;
    const list = el("ol");
    for (const e of entries) {
      const name = e.word ?? e.label ?? e.token ?? "";
      const item = el("li", {}, `${name}: ${e.probability.toFixed(4)}`);
      if (group === "labels" && classifier()) {
        const pick = el("button", { class: "pick-label", "data-label": e.id, title: "explain this label" }, "explain");
        pick.addEventListener("click", () => { state.labels[i] = e.id; explainPane(i); });
        item.append(" ", pick);
      }
      list.append(item);
    }
    box.append(el("h3", {}, group), list);
  }
  return box;
}

// Layer × token, last layer on top; each cell's value on hover.
function heatmap(report, grid, tokens) {
  const table = el("table", { class: "heatmap" });
  if (!grid) return table;
  const top = Math.max(...grid.flat().filter(Number.isFinite), 1e-12);
  const head = el("tr", {}, undefined);
  head.append(el("th"), ...tokens.map((t) => el("th", {}, t)));
  table.append(el("thead"));
  table.tHead.append(head);
  const body = el("tbody");
  for (let l = grid.length - 1; l >= 0; l--) {
    const tr = el("tr");
    tr.append(el("th", {}, `layer ${l + 1}`));
    grid[l].forEach((v) => {
      const td = el("td", { title: v.toFixed(4), "data-value": v });
      td.style.background = shade(v / top).background;
      tr.append(td);
    });
    body.append(tr);
  }
  table.append(body);
  return table;
}

// A causal model's heads cover the prompt and the tokens generated from it but the last.
async function loadHeads() {
  state.heads = null;
  const layers = state.reports[0].layers;
  state.layer = Math.min(Math.max(state.layer, 1), layers);
  const body = { text: state.texts[0], layer: state.layer };
  if (causal()) body.generate = request(0).generate;
  const response = await api("/api/heads", body);
  state.heads = await response.json();
}

// Lines from each token (left) to what it attends (right), one colour per head.
function drawHeads() {
  const view = $("head-view");
  if (!state.heads) { view.hidden = true; return; }
  view.hidden = false;
  $("head-layer").textContent = state.heads.layer;
  const heads = state.heads.heads;
  const toggles = $("head-toggles");
  if (toggles.children.length !== heads.length) {
    toggles.replaceChildren(...heads.map((_, h) => {
      const box = el("input", { type: "checkbox", "data-head": h });
      box.checked = !state.hidden.has(h);
      box.addEventListener("change", () => { box.checked ? state.hidden.delete(h) : state.hidden.add(h); drawHeads(); });
      const label = el("label", {}, undefined);
      label.style.color = PALETTE[h % PALETTE.length];
      label.append(box, ` head ${h + 1}`);
      return label;
    }));
  }
  const tokens = state.heads.tokens;
  const svg = $("heads");
  const [left, right, step] = [150, 450, 20];
  svg.setAttribute("viewBox", `0 0 600 ${tokens.length * step + 20}`);
  svg.setAttribute("height", tokens.length * step + 20);
  const nodes = [];
  tokens.forEach((t, i) => {
    nodes.push(svgEl("text", { x: left - 8, y: 20 + i * step, "text-anchor": "end" }, t));
    nodes.push(svgEl("text", { x: right + 8, y: 20 + i * step }, t));
  });
  heads.forEach((rowsOfHead, h) => {
    if (state.hidden.has(h)) return;
    rowsOfHead.forEach((row, i) => {
      const strongest = row.indexOf(Math.max(...row));
      row.forEach((w, j) => {
        if (w < 0.05 && j !== strongest) return;
        nodes.push(svgEl("line", {
          x1: left, y1: 15 + i * step, x2: right, y2: 15 + j * step, stroke: PALETTE[h % PALETTE.length],
          "stroke-opacity": Math.min(1, w).toFixed(3), "stroke-width": 2, "data-head": h,
        }, undefined));
      });
    });
  });
  svg.replaceChildren(...nodes);
}

async function download(format) {
  const report = state.reports[0];
  if (!report) return;
  let blob;
  if (format === "json") {
    blob = new Blob([JSON.stringify(report)], { type: "application/json" });
  } else {
    const body = request(0);
    if (causal()) body.figure_token = state.generated;
    try {
      // The server draws it from the report it kept, or explains the text again if that
      // report is gone (two others since): the bar shows while it does.
      blob = await whileWorking(() => api(`/api/figure?format=${format}`, body).then((r) => r.blob()));
    } catch (e) {
      $("error").textContent = e.message;
      return;
    }
  }
  save(blob, format);
}

// Hands `blob` to the browser as the file bert-explain.`format`.
function save(blob, format) {
  const a = el("a", { href: URL.createObjectURL(blob), download: `bert-explain.${format}` });
  document.body.append(a);
  a.click();
  a.remove();
}

async function start() {
  state.info = await api("/api/info").then((r) => r.json());
  $("model").textContent = `${state.info.model} · ${state.info.family} · ${state.info.task}`;
  $("mixings").append(...state.info.mixings.filter((m) => m !== "attention").map((m) => {
    const label = el("label", {}, undefined);
    label.append(el("input", { type: "checkbox", value: m }), ` ${m} `);
    return label;
  }));
  if (state.info.reads === "image") return startImage();
  $("causal-options").hidden = !causal();
  $("encoder-options").hidden = state.info.predicts !== "words";
  $("text-a").value = causal() ? "The author talked to Sara about" :
    state.info.predicts === "words" ? "The author talked to Sara about [MASK] book." : "The keys to the cabinet are here.";
  $("compare").addEventListener("change", () => { $("text-b").hidden = !$("compare").checked; });
  const fresh = () => { state.targets = [null, null]; state.labels = [null, null]; explainAll(); };
  $("explain").addEventListener("click", fresh);
  for (const id of ["text-a", "text-b"]) {
    $(id).addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); fresh(); }
    });
  }
  $("mixing").addEventListener("change", () => { state.mixing = $("mixing").value; draw(); });
  $("aggregation").addEventListener("change", () => { state.aggregation = $("aggregation").value; draw(); });
  $("layer").addEventListener("input", async () => {
    state.layer = Number($("layer").value);
    try { await loadHeads(); } catch (e) { $("error").textContent = e.message; }
    draw();
  });
  for (const button of document.querySelectorAll(".downloads button")) {
    button.addEventListener("click", () => download(button.dataset.format));
  }
  document.body.dataset.started = "true";
}

start().catch((e) => { $("error").textContent = e.message; });
