// Opens a causal model's `--html` page in headless Chromium (as check-report.mjs does for an
// encoder's) and checks that it works offline: the prompt is shaded for the outlined
// generated token (the last), clicking another generated token explains it with the
// report's numbers, the layer slider and the method switch change the shading, and a
// `--mixing` method's maps are offered. No console errors, no network requests.
//
// Usage: node check-causal-report.mjs REPORT.html SCREENSHOT.png
// Prints one JSON line with what it saw; exits 1 with the reasons when a check fails.
import { args, checks, launch, openFile } from "./chromium.mjs";

const [pagePath, screenshot] = args("node check-causal-report.mjs REPORT.html SCREENSHOT.png", 2);
const { failures, check, finish } = checks();
const { browser, close } = await launch({ width: 1280, height: 900 });
let seen = {};
try {
  const { page, errors, requests } = await openFile(browser, pagePath);

  const report = await page.evaluate(() => JSON.parse(document.getElementById("report-data").textContent).report);
  const [m, g, layers] = [report.prompt_tokens.length, report.generated_tokens.length, report.layers];
  const shading = () => page.$$eval("#sentence .token", (spans) => spans.map((s) => getComputedStyle(s).backgroundColor));
  // The value a heatmap cell shows, by method, layer (1-based) and prompt token.
  const cell = (method, layer, j) => page.getAttribute(
    `table.heatmap[data-method=${method}] tbody tr[data-layer='${layer}'] td.cell[data-token='${j}']`, "title");
  const ends = (title, value) => title && title.endsWith(`: ${value.toFixed(4)}`);

  const initial = await shading();
  check(initial.length === m, `${initial.length} prompt tokens on the page, want ${m}`);
  check(new Set(initial).size > 1, "the prompt is not shaded");
  const generated = await page.$$eval("#sentence .generated", (spans) => spans.map((s) => s.classList.contains("target")));
  check(generated.length === g, `${generated.length} generated tokens on the page, want ${g}`);
  check(generated[g - 1] && generated.filter(Boolean).length === 1, "the last generated token is not the one outlined");
  const last = await cell("flow", layers, 0);
  check(ends(last, report.relevance.flow[g - 1][0][layers - 1]), `flow of the last token says ${JSON.stringify(last)}`);

  // Another generated token: its own numbers.
  await page.click("#sentence .generated[data-generated='0']");
  const first = await shading();
  check(JSON.stringify(first) !== JSON.stringify(initial), "clicking generated token 0 did not change the shading");
  for (const method of ["raw", "rollout", "flow"]) {
    const title = await cell(method, 1, m - 1);
    check(ends(title, report.relevance[method][0][m - 1][0]),
      `${method} of token 0, layer 1, prompt token ${m - 1} says ${JSON.stringify(title)}`);
  }

  // Layer slider and method switch.
  await page.locator("#layer").fill("1");
  const afterSlider = await shading();
  check(JSON.stringify(afterSlider) !== JSON.stringify(first), "moving the slider to layer 1 did not change the shading");
  await page.check("#method-raw");
  check(JSON.stringify(await shading()) !== JSON.stringify(afterSlider), "switching to raw attention did not change the shading");

  // A --mixing method's maps.
  const mixings = Object.keys(report.methods || {}).filter((k) => k !== "attention");
  for (const mixing of mixings) {
    await page.check(`#mixing-${mixing}`);
    const title = await cell("rollout", 1, 0);
    check(ends(title, report.methods[mixing].rollout[0][0][0]), `${mixing} rollout says ${JSON.stringify(title)}`);
  }
  check(mixings.length > 0, "the report has no --mixing method to switch to");

  // With --lrp: generated token 0's relevance over the prompt, then token 1's over the prompt
  // and token 0.
  let importance = null;
  if (report.importance) {
    await page.click("#sentence .generated[data-generated='0']");
    const cells = async () => page.$$eval("#importance tr[data-score=attnlrp] td.cell", (tds) => tds.map((td) => td.title));
    const zero = await cells();
    check(zero.length === m && zero[m - 1].endsWith(`: ${report.importance[0].attnlrp[m - 1].toFixed(4)}`),
      `AttnLRP of generated token 0 shows ${JSON.stringify(zero)}`);
    await page.click("#sentence .generated[data-generated='1']");
    const one = await cells();
    check(one.length === m + 1 && one[m].endsWith(`: ${report.importance[1].attnlrp[m].toFixed(4)}`),
      `AttnLRP of generated token 1 shows ${JSON.stringify(one)}`);
    importance = [zero.length, one.length];
  }

  await page.screenshot({ path: screenshot, fullPage: true });
  check(errors.length === 0, `console errors: ${errors.join("; ")}`);
  check(requests.length === 0, `network requests: ${requests.join(", ")}`);
  seen = { prompt: m, generated: g, layers, mixings, importance, errors, requests, screenshot };
} catch (e) {
  failures.push(`the page failed: ${e.message}`);
} finally {
  await close();
}
finish(seen);
