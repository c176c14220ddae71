// Opens an image's bert-explain HTML report (SPEC §10) in headless Chromium and checks that
// it works offline: the picture is drawn under a grid of the report's patches, moving the
// layer slider and switching the method change the patches' tints, each patch carries its
// value, the tokens before the patches are listed apart, and the row of overlays (one per
// layer) picks the layer; with --evaluate, one overlay per importance score. Writes a
// screenshot.
//
// Usage: node check-image-report.mjs REPORT.html SCREENSHOT.png
// Prints one JSON line with what it saw; exits 1 with the reasons when a check fails.
import { args, checks, launch, openFile } from "./chromium.mjs";

const [page_path, screenshot] = args("node check-image-report.mjs REPORT.html SCREENSHOT.png", 2);
const { check, finish, failures } = checks();

const { browser, close } = await launch({ width: 1280, height: 900 });
let seen = {};
try {
  const { page, errors, requests } = await openFile(browser, page_path);
  const report = await page.evaluate(() => JSON.parse(document.getElementById("report-data").textContent).report);
  const [rows, cols] = report.image.grid;
  const layers = report.layers;
  const tints = () => page.$$eval("#picture .patch", (cells) => cells.map((c) => c.style.background));

  const picture = await page.locator("#picture img").count();
  check(picture === 1, "the picture is not drawn under the patches");
  const initial = await tints();
  check(initial.length === rows * cols, `${initial.length} patches, want ${rows * cols}`);
  check(new Set(initial).size > 1, "the patches are not tinted");

  // The last patch's value at the last layer, as the report has it.
  const method = report.relevance.flow ? "flow" : "rollout";
  const last = report.relevance[method][layers - 1];
  const want = last[last.length - 1].toFixed(4);
  const title = await page.getAttribute(`#picture .patch[data-patch="${rows * cols - 1}"]`, "title");
  check(title && title.endsWith(`r${rows - 1} c${cols - 1}: ${want}`), `the last patch says ${JSON.stringify(title)}, want ${want}`);

  const leading = await page.textContent("#leading");
  check(leading.startsWith(report.tokens[0]), `the tokens before the patches are not listed apart: ${leading}`);

  // At layer 1 every map is raw attention's row, scaled (rollout's and flow's patches are
  // half of it): switch the method at the last layer, then move the slider.
  await page.check("#method-raw");
  const afterMethod = await tints();
  check(JSON.stringify(afterMethod) !== JSON.stringify(initial), "switching to raw attention did not change the tints");
  await page.locator("#layer").fill("1");
  const afterSlider = await tints();
  check(JSON.stringify(afterSlider) !== JSON.stringify(afterMethod), "moving the slider to layer 1 did not change the tints");

  const strip = await page.locator("#layers .overlay").count();
  check(strip === layers, `${strip} overlays in the row of layers, want ${layers}`);
  await page.click(`#layers .overlay[data-layer="${layers}"]`);
  check(await page.inputValue("#layer") === String(layers), "clicking the last layer's overlay did not pick it");
  check(await page.locator(`#layers .overlay.selected[data-layer="${layers}"]`).count() === 1, "the picked layer is not marked");

  check(report.prediction === null || (await page.locator("#prediction .bars tr").count()) > 0, "the labels are missing");

  // With --evaluate: one overlay per headline importance score, each patch with its value.
  let scores = 0;
  if (report.importance) {
    const headline = await page.evaluate(() =>
      JSON.parse(document.getElementById("report-data").textContent).scores.map((s) => s.name));
    const shown = headline.filter((name) => Array.isArray(report.importance[name]));
    scores = await page.locator("#importance .scores figure").count();
    check(scores === shown.length && scores > 0, `${scores} importance overlays, want ${shown.length}`);
    const first = shown[0];
    const values = report.importance[first];
    const want = values[values.length - 1].toFixed(4);
    const cell = `#importance figure[data-score="${first}"] .patch[data-patch="${rows * cols - 1}"]`;
    const said = await page.getAttribute(cell, "title");
    check(said && said.endsWith(`r${rows - 1} c${cols - 1}: ${want}`), `${first}'s last patch says ${JSON.stringify(said)}, want ${want}`);
    const tinted = await page.$$eval(`#importance figure[data-score="${first}"] .patch`, (cells) => cells.map((c) => c.style.background));
    check(new Set(tinted).size > 1, "the importance overlay is not tinted");
  }
  await page.screenshot({ path: screenshot, fullPage: true });
  check(errors.length === 0, `console errors: ${errors.join("; ")}`);
  check(requests.length === 0, `network requests: ${requests.join(", ")}`);
  seen = { patches: initial.length, layers, strip, scores, leading, errors, requests, screenshot };
} catch (e) {
  failures.push(`browser check crashed: ${e.stack || e}`);
} finally {
  await close();
}
finish(seen);
