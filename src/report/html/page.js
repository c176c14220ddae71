// bert-explain HTML report: everything is drawn from the JSON report inlined in the page.
"use strict";

const data = JSON.parse(document.getElementById("report-data").textContent);
const report = data.report;
// A generated text's report explains each generated token over the prompt: its tokens are
// the prompt's, and the page picks a generated token where an encoder's picks a position.
const CAUSAL = report.mode === "causal";
const TOKENS = CAUSAL ? report.prompt_tokens : report.tokens;
const METHODS = ["raw", "rollout", "flow"];
const NAMES = { raw: "Raw attention", rollout: "Attention rollout", flow: "Attention flow" };
const CORRECTED = CAUSAL && report.relevance.rollout_corrected;
if (CORRECTED) NAMES.rollout = "Attention rollout, corrected";
const TARGET = CAUSAL ? -1 : report.target.index;
// An image's report: the picture and its patches in the sentence's place (image.js).
const IMAGE = CAUSAL ? null : report.image || null;
// With --all-positions the page can explain any position (attention's raw, rollout and flow).
const ALL = report.all_positions || null;
// With --mixing: SPEC §8's methods, each with layer (shown in raw's place), rollout, flow.
const MIXINGS = ["attention", ...Object.keys(report.methods || {}).filter((m) => m !== "attention")];
// Flow first, as the paper's figure; rollout where an encoder's flow was left out.
const state = {
  mixing: "attention", method: !CAUSAL && !report.relevance.flow ? "rollout" : "flow",
  layer: report.layers, position: TARGET,
  generated: CAUSAL ? data.generated : 0,
};

// What the page calls a map of the chosen mixing.
function name(method) {
  if (state.mixing === "attention") return NAMES[method];
  return `${state.mixing} ${method === "raw" ? "layer" : method}`;
}

// A causal report's map of the chosen generated token, `[g][m][L]` → layer × prompt token.
function generatedRows(method) {
  const maps = state.mixing === "attention" ? report.relevance : report.methods[state.mixing];
  const key = state.mixing !== "attention" && method === "raw" ? "layer"
    : CORRECTED && state.mixing === "attention" && method === "rollout" ? "rollout_corrected" : method;
  const perToken = maps && maps[key] && maps[key][state.generated];
  if (!perToken) return null;
  return perToken[0].map((_, l) => perToken.map((row) => row[l]));
}

// The method's layer × token rows for the chosen position, or null if the report lacks them.
function rows(method) {
  if (CAUSAL) return generatedRows(method);
  if (state.mixing !== "attention") {
    if (state.position !== TARGET) return null;
    return report.methods[state.mixing][method === "raw" ? "layer" : method];
  }
  if (state.position === TARGET) return report.relevance[method];
  if (!ALL || !ALL[method] || !ALL[method].length) return null;
  return ALL[method].map((layer) => layer[state.position]);
}

// Whether the report has the chosen mixing's map for the explained position (an encoder's
// flow is left out of long texts unless --flow asks for it).
function atTarget(method) {
  const maps = state.mixing === "attention" ? report.relevance : report.methods[state.mixing];
  return Boolean(maps[state.mixing !== "attention" && method === "raw" ? "layer" : method]);
}
const FLOW_LEFT_OUT = CAUSAL ? " (--flow computes it)"
  : " (left out past 1,024 tokens unless --flow asks for it, or with --no-flow)";

// The top of the shared colour scale: the largest value shown in any heatmap.
function scaleMax() {
  const values = METHODS.flatMap((m) => (rows(m) || []).flat());
  return Math.max(...values.filter(Number.isFinite), 1e-12);
}

function el(tag, attributes, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// The shared ramp of the figure and the terminal, t in [0, 1].
function colour(t) {
  const ramp = data.ramp;
  const x = Math.min(Math.max(Number.isFinite(t) ? t : 0, 0), 1) * (ramp.length - 1);
  const i = Math.min(Math.floor(x), ramp.length - 2);
  const f = x - i;
  return ramp[i].map((a, c) => Math.round(a + (ramp[i + 1][c] - a) * f));
}
const css = (c) => `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
const isDark = (c) => 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] < 140;
const fixed = (v) => v.toFixed(4);
const probability = (p) => (p >= 1e-3 || p === 0 ? p.toFixed(4) : p.toExponential(2));

function header() {
  if (CAUSAL) {
    document.getElementById("meta").textContent =
      `${report.model} on ${report.device} · ${report.layers} layers × ${report.heads} heads · ` +
      `a prompt of ${TOKENS.length} tokens and ${report.generated_tokens.length} generated`;
    document.getElementById("hidden-note").remove();
    return;
  }
  const t = report.target;
  document.getElementById("meta").textContent =
    `${report.model} on ${report.device} · ${report.layers} layers × ${report.heads} heads · ` +
    `explaining position ${data.positions[t.index]} “${t.token}”`;
  const note = document.getElementById("hidden-note");
  if (report.hidden && report.hidden.length > 0) {
    note.textContent = `Left out: ${report.hidden.map((h) => h.token).join(" ")}; ` +
      "each layer is renormalised over the other tokens.";
  } else {
    note.remove();
  }
}

function controls() {
  const mixings = document.getElementById("mixing");
  if (MIXINGS.length === 1) mixings.remove();
  for (const m of MIXINGS.length > 1 ? MIXINGS : []) {
    const input = el("input", { type: "radio", name: "mixing", value: m, id: `mixing-${m}` });
    input.checked = m === state.mixing;
    input.addEventListener("change", () => {
      state.mixing = m;
      // Methods other than attention are in the report for the target only.
      if (m !== "attention") state.position = TARGET;
      update();
    });
    const label = el("label", { for: `mixing-${m}` });
    label.append(input, ` ${m}`);
    mixings.append(label);
  }
  const methods = document.getElementById("method");
  for (const m of METHODS) {
    const input = el("input", { type: "radio", name: "method", value: m, id: `method-${m}` });
    input.checked = m === state.method;
    input.addEventListener("change", () => { state.method = m; update(); });
    const label = el("label", { for: `method-${m}` });
    label.append(input, ` ${m}`);
    methods.append(label);
  }
  const slider = document.getElementById("layer");
  slider.max = String(report.layers);
  slider.value = String(state.layer);
  slider.addEventListener("input", () => { state.layer = Number(slider.value); update(); });
}

function sentence() {
  const box = document.getElementById("sentence");
  TOKENS.forEach((token, j) => {
    const span = el("span", { class: "token", "data-index": String(j) }, token);
    if (j === TARGET) span.classList.add("target");
    if (ALL) {
      span.classList.add("pickable");
      span.addEventListener("click", () => {
        state.position = j;
        if (state.mixing !== "attention") {
          state.mixing = "attention";
          document.getElementById("mixing-attention").checked = true;
        }
        if (!rows(state.method)) {
          state.method = "flow";
          document.getElementById("method-flow").checked = true;
        }
        update();
      });
    }
    box.append(span);
  });
  if (ALL) {
    document.getElementById("pick-note").textContent =
      "Click a token to explain its position instead (attention's maps; the other mixings " +
      "are in the report for the target only).";
  }
  if (CAUSAL) generatedTokens(box);
}

// A causal report's generated tokens after the prompt, each explained when clicked.
function generatedTokens(box) {
  report.generated_tokens.forEach((token, k) => {
    const span = el("span", { class: "generated", "data-generated": String(k), title: "explain this generated token" }, token);
    span.addEventListener("click", () => { state.generated = k; update(); });
    box.append(span);
  });
  document.getElementById("pick-note").textContent =
    "The prompt is shaded for the outlined generated token; click another to explain it.";
}

function prediction() {
  const box = document.getElementById("prediction");
  if (CAUSAL) {
    box.append(el("p", { id: "generated-text" }, `Generated: ${report.generated_text}`));
    return;
  }
  const p = report.prediction;
  if (!p) {
    box.append(el("p", { class: "note", id: "no-prediction" },
      "Unavailable: this report has no prediction (the checkpoint has no prediction " +
      "head, or the attention was read from a file)."));
    return;
  }
  // A masked LM's candidates and top words, or a classifier's labels.
  const named = (items, key) => items.map((w) => ({ word: w[key], probability: w.probability }));
  const groups = p.labels
    ? [["labels", named(p.labels, "label"), ""]]
    : [["candidates", named(p.candidates, "word"), ""], ["top", named(p.top, "word"), "top"]];
  const all = groups.flatMap((g) => g[1]);
  const max = Math.max(...all.map((w) => w.probability), 1e-12);
  const table = el("table", { class: "bars" });
  for (const [title, words, kind] of groups) {
    if (words.length === 0) continue;
    const head = table.insertRow();
    head.append(el("th", { colspan: "3" }, title === "top" ? `top ${words.length}` : title));
    for (const w of words) {
      const row = table.insertRow();
      row.append(el("td", { class: "word" }, w.word));
      const cell = el("td");
      const bar = el("div", { class: `bar ${kind}`, title: `p(${w.word}) = ${w.probability}` });
      bar.style.width = `${Math.round((w.probability / max) * 160)}px`;
      cell.append(bar);
      row.append(cell, el("td", {}, probability(w.probability)));
    }
  }
  box.append(table);
}

function heatmaps() {
  const box = document.getElementById("heatmaps");
  for (const m of METHODS) {
    const table = el("table", { class: "heatmap", "data-method": m });
    table.append(el("caption", {}, name(m)));
    const head = el("thead");
    const names = head.insertRow();
    names.append(el("th", {}, ""));
    TOKENS.forEach((token) => names.append(el("th", {}, token)));
    table.append(head);
    const body = el("tbody");
    for (let l = report.layers - 1; l >= 0; l--) {
      const row = body.insertRow();
      row.dataset.layer = String(l + 1);
      row.append(el("th", {}, String(l + 1)));
      TOKENS.forEach((token, j) => {
        const cell = el("td", { class: "cell", "data-token": String(j) });
        cell.addEventListener("click", () => {
          if (!rows(m)) return;
          state.method = m;
          state.layer = l + 1;
          document.getElementById(`method-${m}`).checked = true;
          document.getElementById("layer").value = String(l + 1);
          update();
        });
        row.append(cell);
      });
    }
    table.append(body);
    box.append(table);
  }
  const legend = document.getElementById("legend");
  const stops = data.ramp.map((c, i) => `${css(c)} ${(100 * i) / (data.ramp.length - 1)}%`);
  const ramp = el("span", { class: "ramp" });
  ramp.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
  legend.append(el("span", {}, "0"), ramp, el("span", { id: "scale-max" }),
    el("span", {}, "· one scale for all three maps; hover a cell for its value, click to select it"));
}

// Colours every heatmap cell for the chosen position on the shared scale.
function paintHeatmaps() {
  const max = scaleMax();
  document.getElementById("scale-max").textContent = fixed(max);
  document.querySelectorAll("table.heatmap[data-method]").forEach((table) => {
    const m = table.dataset.method;
    const maps = rows(m);
    table.querySelector("caption").textContent = name(m);
    table.classList.toggle("unavailable", !maps);
    table.querySelectorAll("thead th").forEach((th, k) => {
      th.classList.toggle("target", k - 1 === state.position);
    });
    table.querySelectorAll("tbody tr").forEach((tr) => {
      const l = Number(tr.dataset.layer) - 1;
      tr.querySelectorAll("td.cell").forEach((td, j) => {
        if (!maps) {
          td.style.background = "#eee";
          td.title = CAUSAL || !atTarget(m) ? `${name(m)} is not in this report${m === "flow" ? FLOW_LEFT_OUT : ""}`
            : `${name(m)} is in the report for position ${data.positions[TARGET]} only`;
          return;
        }
        const value = maps[l][j];
        td.style.background = css(colour(value / max));
        td.title = `${name(m)}, layer ${l + 1}, ${TOKENS[j]}: ${fixed(value)}`;
      });
    });
  });
}

// White at 0, to data.diverging's first end at 1 and its second at −1: the figure's scale
// for signed scores.
function diverging(t) {
  const v = Math.min(Math.max(Number.isFinite(t) ? t : 0, -1), 1);
  const end = data.diverging[v >= 0 ? 0 : 1];
  return end.map((c) => Math.round(255 + (c - 255) * Math.abs(v)));
}

// With --evaluate or --lrp: the importance scores of the explained class (a causal report's
// for the chosen generated token, over the tokens fed at its step), or null.
function importance() {
  const scored = CAUSAL ? (report.importance || [])[state.generated] : report.importance;
  if (!scored) return null;
  const tokens = CAUSAL
    ? [...TOKENS, ...report.generated_tokens.slice(0, state.generated)] : TOKENS;
  const shown = data.scores.filter((s) => Array.isArray(scored[s.name]));
  return shown.length ? { word: scored.word, tokens, shown, scored } : null;
}

// Each headline importance score as a row of cells over the tokens, on its own scale.
function paintImportance() {
  const box = document.getElementById("importance");
  const found = importance();
  box.hidden = !found;
  if (!found) return;
  if (IMAGE) {
    box.replaceChildren(el("h2", {}, "Importance"), ...imageImportance(found));
    return;
  }
  const table = el("table", { class: "heatmap importance" });
  const note = el("p", { class: "note" }, `Each token's importance for “${found.word}” ` +
    "(each row on its own scale; red raises it, blue lowers it; hover a cell for its value)");
  const head = table.createTHead().insertRow();
  head.append(el("th", {}, ""));
  found.tokens.forEach((token) => head.append(el("th", {}, token)));
  const body = table.createTBody();
  for (const score of found.shown) {
    const values = found.scored[score.name];
    const largest = Math.max(...values.map(Math.abs), 1e-12);
    const row = body.insertRow();
    row.dataset.score = score.name;
    row.append(el("th", {}, score.label));
    values.forEach((value, j) => {
      const c = score.signed ? diverging(value / largest) : colour(value / largest);
      const cell = el("td", { class: "cell", title: `${score.label}, ${found.tokens[j]}: ${fixed(value)}` });
      cell.style.background = css(c);
      row.append(cell);
    });
  }
  box.replaceChildren(el("h2", {}, "Importance"), note, table);
}

// Shades the sentence and ranks the tokens for the chosen method and layer.
function update() {
  // A map the report lacks (raw from another position, flow without --flow) is not offered.
  for (const m of METHODS) document.getElementById(`method-${m}`).disabled = !rows(m);
  if (!rows(state.method)) {
    state.method = METHODS.find((m) => rows(m)) || "rollout";
    document.getElementById(`method-${state.method}`).checked = true;
  }
  const row = rows(state.method)[state.layer - 1];
  const max = Math.max(...row, 1e-12);
  document.querySelectorAll("#sentence .token").forEach((span, j) => {
    span.classList.toggle("target", j === state.position);
    const c = colour(row[j] / max);
    span.style.background = css(c);
    span.style.color = isDark(c) ? "#fff" : "#000";
    span.title = `${name(state.method)}, layer ${state.layer}: ${fixed(row[j])}`;
  });
  document.getElementById("layer-value").textContent = `${state.layer} of ${report.layers}`;
  const p = state.position;
  const from = CAUSAL ? `for generated token ${state.generated} “${report.generated_tokens[state.generated]}”`
    : `from position ${data.positions[p]} “${report.tokens[p]}”`;
  document.getElementById("selection").textContent =
    `${name(state.method)} ${from}, layer ${state.layer} (shaded relative to the most relevant token)`;
  document.querySelectorAll("#sentence .generated").forEach((span, k) => {
    span.classList.toggle("target", k === state.generated);
  });
  const ranked = row.map((v, j) => [v, j]).sort((a, b) => b[0] - a[0]).slice(0, 5);
  const list = document.querySelector("#ranking ol");
  list.replaceChildren(...ranked.map(([v, j]) => el("li", {}, `${TOKENS[j]} ${fixed(v)}`)));
  if (IMAGE) paintImage(row);
  else paintHeatmaps();
  paintImportance();
  document.querySelectorAll("table.heatmap[data-method]").forEach((table) => {
    table.classList.toggle("selected", table.dataset.method === state.method);
    table.querySelectorAll("tbody tr").forEach((tr) => {
      tr.classList.toggle("selected", Number(tr.dataset.layer) === state.layer);
    });
  });
}

header();
controls();
if (IMAGE) drawImage();
else sentence();
prediction();
if (!IMAGE) heatmaps();
update();
document.body.dataset.ready = "true";
