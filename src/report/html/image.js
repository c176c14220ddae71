// bert-explain HTML report, an image's part (SPEC §10): the picture the model saw with the
// chosen map over its patches, the tokens before the patches ([CLS], [DIST], registers)
// listed apart, and a row of overlays, one per layer, that picks the layer. Each overlay is
// on its own scale (its largest patch), as the figure's panels are: a patch is veiled by how
// little it matters, so the picture shows where the map is high (without the picture, the
// patches take the ramp's colours).
"use strict";

const VEIL = 0.8;
// How strongly the largest importance score tints its patch over the picture.
const TINT = 0.75;

// The shown tokens as the grid's cells (-1 where a patch is not shown) and the others.
function patchIndex() {
  const [rows, cols] = report.image.grid;
  const total = data.positions.length + (report.hidden ? report.hidden.length : 0);
  const lead = total - rows * cols;
  const cells = new Array(rows * cols).fill(-1);
  const leading = [];
  data.positions.forEach((p, j) => {
    if (p >= lead) cells[p - lead] = j;
    else leading.push(j);
  });
  return { rows, cols, cells, leading };
}

// An empty overlay `width` pixels wide: the picture (where the page has it) under a grid.
function overlay(width) {
  const { rows, cols, cells } = patchIndex();
  const box = el("div", { class: "overlay" });
  box.style.width = `${width}px`;
  box.style.height = `${Math.round((width * rows) / cols)}px`;
  if (data.picture) box.append(el("img", { src: data.picture, alt: "the picture as the model saw it" }));
  const grid = el("div", { class: "patches" });
  grid.style.gridTemplateColumns = `repeat(${cols}, 1fr)`;
  grid.style.gridTemplateRows = `repeat(${rows}, 1fr)`;
  cells.forEach((_, k) => grid.append(el("div", { class: "patch", "data-patch": String(k) })));
  box.append(grid);
  return box;
}

// Tints `box`'s patches by `row` (a layer's map over the shown tokens); returns its largest.
function paintOverlay(box, row, label) {
  const { cols, cells } = patchIndex();
  const values = cells.map((j) => (j < 0 ? 0 : row[j]));
  const max = Math.max(...values, 1e-12);
  box.querySelectorAll(".patch").forEach((cell, k) => {
    const t = values[k] / max;
    cell.style.background = data.picture ? `rgba(0, 0, 0, ${(VEIL * (1 - t)).toFixed(3)})` : css(colour(t));
    cell.title = `${label}, r${Math.floor(k / cols)} c${k % cols}: ${fixed(values[k])}`;
  });
  return max;
}

function drawImage() {
  const box = document.getElementById("sentence");
  box.classList.add("image");
  const main = overlay(448);
  main.id = "picture";
  box.append(main, el("p", { class: "note", id: "leading" }));
  const strip = el("div", { id: "layers" });
  for (let l = 1; l <= report.layers; l++) {
    const small = overlay(96);
    small.dataset.layer = String(l);
    small.addEventListener("click", () => {
      state.layer = l;
      document.getElementById("layer").value = String(l);
      update();
    });
    const figure = el("figure", {});
    figure.append(small, el("figcaption", {}, `layer ${l}`));
    strip.append(figure);
  }
  box.append(strip);
  const heading = document.querySelector("#heatmaps").closest("section");
  heading.hidden = true;
  document.querySelector("#ranking h2").textContent = "Most relevant tokens and patches";
}

function paintImage(row) {
  const label = `${name(state.method)}, layer ${state.layer}`;
  const max = paintOverlay(document.getElementById("picture"), row, label);
  const { leading } = patchIndex();
  const apart = leading.map((j) => `${TOKENS[j]} ${fixed(row[j])}`);
  const patches = row.reduce((sum, v, j) => (leading.includes(j) ? sum : sum + v), 0);
  document.getElementById("leading").textContent =
    `${apart.join(" · ")}${apart.length ? " · " : ""}patches ${fixed(patches)} in all, ` +
    `the largest ${fixed(max)} (the clearer a patch, the nearer it is to the largest)`;
  const maps = rows(state.method);
  document.querySelectorAll("#layers .overlay").forEach((small) => {
    const l = Number(small.dataset.layer);
    paintOverlay(small, maps[l - 1], `${name(state.method)}, layer ${l}`);
    small.classList.toggle("selected", l === state.layer);
  });
}

// Tints `box`'s patches by an importance score over the tokens, on its own scale (its largest
// patch in size): red where a patch raises the prediction, blue where it lowers it.
function paintScore(box, values, label) {
  const { cols, cells } = patchIndex();
  const patch = cells.map((j) => (j < 0 ? 0 : values[j]));
  const largest = Math.max(...patch.map(Math.abs), 1e-12);
  box.querySelectorAll(".patch").forEach((cell, k) => {
    const t = patch[k] / largest;
    const [r, g, b] = data.diverging[t >= 0 ? 0 : 1];
    cell.style.background = data.picture
      ? `rgba(${r}, ${g}, ${b}, ${(TINT * Math.abs(t)).toFixed(3)})` : css(diverging(t));
    cell.title = `${label}, r${Math.floor(k / cols)} c${k % cols}: ${fixed(patch[k])}`;
  });
  return largest;
}

// The importance scores as a row of overlays, one per headline score.
function imageImportance(found) {
  const strip = el("div", { class: "scores" });
  for (const score of found.shown) {
    const small = overlay(160);
    const largest = paintScore(small, found.scored[score.name], score.label);
    const range = score.signed ? `±${fixed(largest)}` : `0 to ${fixed(largest)}`;
    const figure = el("figure", { "data-score": score.name });
    figure.append(small, el("figcaption", {}, `${score.label} ${range}`));
    strip.append(figure);
  }
  const note = el("p", { class: "note" }, `Each patch's importance for “${found.word}”: red where ` +
    "it raises the prediction, blue where it lowers it, each panel on its own scale " +
    "(hover a patch for its value)");
  return [note, strip];
}
