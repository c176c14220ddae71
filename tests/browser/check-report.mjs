// Opens a bert-explain HTML report in headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core) and checks that it works offline: no console errors, no network
// requests, moving the layer slider changes the shading of the sentence, switching the
// method changes it again, and the heatmap cells carry their values. Writes a screenshot.
//
// Usage: node check-report.mjs REPORT.html SCREENSHOT.png
// Prints one JSON line with what it saw; exits 1 with the reasons when a check fails.
import { args, checks, launch, openFile } from "./chromium.mjs";

const [page_path, screenshot] = args("node check-report.mjs REPORT.html SCREENSHOT.png", 2);
const { failures, check, finish } = checks();

const { browser, close } = await launch({ width: 1280, height: 900 });
let seen = {};
try {
  const { page, errors, requests } = await openFile(browser, page_path);

  const shading = () => page.$$eval("#sentence .token", (spans) =>
    spans.map((s) => getComputedStyle(s).backgroundColor));
  const report = await page.evaluate(() => JSON.parse(document.getElementById("report-data").textContent).report);
  const layers = report.layers;
  const n = report.tokens.length;

  const initial = await shading();
  check(initial.length === n, `${initial.length} sentence tokens, want ${n}`);
  check(new Set(initial).size > 1, "the sentence is not shaded");

  const slider = page.locator("#layer");
  check(await slider.getAttribute("max") === String(layers), "the slider does not span the layers");
  await slider.fill("1");
  const afterSlider = await shading();
  check(JSON.stringify(afterSlider) !== JSON.stringify(initial), "moving the slider to layer 1 did not change the shading");
  check((await page.textContent("#layer-value")).startsWith("1 of"), "the slider's value is not shown");

  await page.check("#method-raw");
  const afterMethod = await shading();
  check(JSON.stringify(afterMethod) !== JSON.stringify(afterSlider), "switching to raw attention did not change the shading");
  check(await page.$eval("table.heatmap.selected", (t) => t.dataset.method) === "raw", "the raw heatmap is not marked as selected");

  const cells = await page.$$eval("table.heatmap[data-method] td.cell", (tds) => tds.map((td) => td.title));
  check(cells.length === 3 * layers * n, `${cells.length} heatmap cells, want ${3 * layers * n}`);
  // A report without flow (--no-flow, or a long text) offers none and says why.
  const FLOW = Boolean(report.relevance.flow);
  const first = await page.locator("table.heatmap[data-method=flow] tbody tr:last-child td.cell").first();
  await first.hover();
  const title = await first.getAttribute("title");
  if (FLOW) {
    const want = report.relevance.flow[0][0].toFixed(4);
    check(title && title.endsWith(`: ${want}`), `flow layer 1 token 0 says ${JSON.stringify(title)}, want the value ${want}`);
  } else {
    check(await page.isDisabled("#method-flow"), "flow is offered though the report has none");
    check(title && title.startsWith("Attention flow is not in this report") && title.includes("--flow"),
      `a flow cell without flow says ${JSON.stringify(title)}`);
  }

  const prediction = report.prediction
    ? await page.locator("#prediction .bars tr").count()
    : await page.locator("#no-prediction").count();
  check(prediction > 0, "the prediction (or why it is unavailable) is missing");

  // With --mixing: each method's switch shows its own maps (flow here, or rollout without).
  const mixings = Object.keys(report.methods || {}).filter((m) => m !== "attention");
  if (mixings.length > 0) {
    const shown = FLOW ? "flow" : "rollout";
    await page.check(`#method-${shown}`);
    const attention = await shading();
    let changed = false;
    for (const m of mixings) {
      await page.check(`#mixing-${m}`);
      changed ||= JSON.stringify(await shading()) !== JSON.stringify(attention);
      const want = report.methods[m][shown][0][0].toFixed(4);
      const title = await page.getAttribute(`table.heatmap[data-method=${shown}] tbody tr:last-child td.cell`, "title");
      check(title && title.startsWith(`${m} ${shown}`) && title.endsWith(`: ${want}`),
        `${m} ${shown} layer 1 token 0 says ${JSON.stringify(title)}, want the value ${want}`);
    }
    check(changed, "switching the mixing never changed the shading");
    await page.check("#mixing-attention");
  }

  let picked = null;
  if (report.all_positions) {
    // Explain another position: every map of attention comes from all_positions.
    const other = report.target.index === 0 ? 1 : 0;
    const before = await shading();
    await page.click(`#sentence .token[data-index="${other}"]`);
    picked = await shading();
    check(JSON.stringify(picked) !== JSON.stringify(before), "picking another position did not change the shading");
    for (const method of FLOW ? ["raw", "flow"] : ["raw"]) {
      check(!(await page.isDisabled(`#method-${method}`)), `${method} is not selectable for position ${other}`);
      const want = report.all_positions[method][0][other][0].toFixed(4);
      const title = await page.getAttribute(`table.heatmap[data-method=${method}] tbody tr:last-child td.cell`, "title");
      check(title && title.endsWith(`: ${want}`), `${method} from position ${other} says ${JSON.stringify(title)}, want ${want}`);
    }
  }

  // With --evaluate or --lrp: each importance score's row, a cell per token with its value.
  let importance = null;
  if (report.importance) {
    importance = await page.$$eval("#importance tr[data-score]", (rows) => rows.map((r) => r.dataset.score));
    check(importance.length > 0 && !(await page.isHidden("#importance")), "the importance scores are not shown");
    for (const score of importance) {
      const want = report.importance[score][n - 1].toFixed(4);
      const title = await page.getAttribute(`#importance tr[data-score=${score}] td.cell:last-child`, "title");
      check(title && title.endsWith(`: ${want}`), `${score} of the last token says ${JSON.stringify(title)}, want ${want}`);
    }
  } else {
    check(await page.isHidden("#importance"), "an importance section without importance scores");
  }

  await page.screenshot({ path: screenshot, fullPage: true });
  check(errors.length === 0, `console errors: ${errors.join("; ")}`);
  check(requests.length === 0, `network requests: ${requests.join(", ")}`);
  seen = { tokens: n, layers, initial, afterSlider, afterMethod, picked, importance, cells: cells.length, errors, requests, screenshot };
} catch (e) {
  failures.push(`browser check crashed: ${e.stack || e}`);
} finally {
  await close();
}
finish(seen);
