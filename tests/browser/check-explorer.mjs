// Drives `bert-explain serve`'s explorer in headless Chromium (Debian's /usr/bin/chromium,
// playwright-core) and checks what it shows against the command line's JSON reports:
// type a sentence and explain it, the flow at the last layer on the page equals the
// report's; the JSON and SVG downloads are the report and its --figure; click a token, the
// page explains that position; switch method, aggregation and layer; the head view draws
// lines for every head; compare shows two panes. While a text is explained the bar under the
// button counts its flows (streamed by /api/explain?progress) up to all done, and is hidden
// once the report is drawn. No console errors and no request leaves the server. Writes a
// screenshot.
//
// Usage: node check-explorer.mjs URL EXPECTED.json SCREENSHOT.png
//   EXPECTED.json: {"text", "second", "click", "layers", "heads", "mask": report,
//   "clicked": report at position click, "both": report with --mixing norm, "figure": its
//   --figure SVG, "lrp": report with --lrp}
// Prints one JSON line with what it saw; exits 1 with the reasons when a check fails.
import { readFileSync } from "node:fs";
import { args, checks, launch, near, watch } from "./chromium.mjs";

const [url, expected_path, screenshot] = args("node check-explorer.mjs URL EXPECTED.json SCREENSHOT.png", 3);
const expected = JSON.parse(readFileSync(expected_path, "utf8"));
const { failures, check, finish } = checks();

const { browser, close: closeBrowser } = await launch({ width: 1280, height: 1000 });
const seen = {};
const pageErrors = [];
try {
  const page = await browser.newPage();
  const { errors, requests } = watch(page, (u) => u.startsWith(url) || u.startsWith("blob:"), pageErrors);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-started=true]", { timeout: 10000 });

  // The values the first pane shows, by token.
  const shown = () => page.$$eval("[data-pane='0'] .token[data-index]", (spans) =>
    spans.map((s) => Number(s.dataset.value)));
  const explained = async (action) => {
    await page.evaluate(() => { document.body.dataset.ready = "false"; });
    await action();
    await page.waitForSelector("body[data-ready=true]", { timeout: 20000 });
  };
  const compare = (got, want, what) => {
    check(got.length === want.length, `${what}: ${got.length} tokens on the page, ${want.length} in the report`);
    got.forEach((g, j) => check(near(g, want[j]), `${what}: token ${j} shows ${g}, the report has ${want[j]}`));
  };

  // Type, with the norm method on, and explain, noting what the progress text says.
  await page.fill("#text-a", expected.text);
  await page.check("#mixings input[value=norm]");
  await page.evaluate(() => {
    // Every text set, from the records: one callback may come for several sets.
    window.progressSeen = [];
    new MutationObserver((records) => {
      for (const record of records) for (const node of record.addedNodes) window.progressSeen.push(node.textContent);
    }).observe($("progress-text"), { childList: true });
  });
  await explained(() => page.click("#explain"));
  const progress = await page.evaluate(() => window.progressSeen);
  seen.progress = progress;
  check(progress.some((t) => /^(\d+)\/\1 flows$/.test(t)), `the bar never counted every flow done: ${progress}`);
  check(await page.$eval("#working", (w) => w.hidden), "the bar is still shown after the report");
  const L = expected.layers;
  compare(await shown(), expected.both.relevance.flow[L - 1], "flow at the last layer");
  seen.tokens = (await shown()).length;

  // The downloads: the report as the command line prints it, and its --figure.
  const downloaded = async (format) => {
    const [file] = await Promise.all([page.waitForEvent("download"), page.click(`button[data-format=${format}]`)]);
    return readFileSync(await file.path(), "utf8");
  };
  // Keys sorted: the expected report went through serde_json's sorted maps.
  const sorted = (v) => Array.isArray(v) ? v.map(sorted) : v !== null && typeof v === "object" ?
    Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v;
  const json = sorted(JSON.parse(await downloaded("json")));
  check(JSON.stringify(json) === JSON.stringify(sorted(expected.both)), "the JSON download is not the report");
  // The figure is drawn from the report the server kept: too quick for the bar to show.
  await page.evaluate(() => {
    window.barShown = false;
    new MutationObserver(() => { window.barShown ||= !$("working").hidden; })
      .observe($("working"), { attributes: true });
  });
  check(await downloaded("svg") === expected.figure, "the SVG download is not the command line's --figure");
  check(!(await page.evaluate(() => window.barShown)), "the bar flashed for a figure answered from memory");
  check(await page.$eval("#working", (w) => w.hidden), "the bar is still shown after a download");

  // Method, aggregation and layer.
  await explained(() => page.selectOption("#mixing", "norm"));
  compare(await shown(), expected.both.methods.norm.flow[L - 1], "norm flow");
  await explained(() => page.selectOption("#aggregation", "rollout"));
  compare(await shown(), expected.both.methods.norm.rollout[L - 1], "norm rollout");
  await explained(async () => {
    await page.$eval("#layer", (input) => { input.value = "1"; input.dispatchEvent(new Event("input")); });
  });
  compare(await shown(), expected.both.methods.norm.rollout[0], "norm rollout at layer 1");
  const cells = await page.$$eval("[data-pane='0'] table.heatmap td", (tds) => tds.length);
  check(cells === L * expected.both.tokens.length, `${cells} heatmap cells, not layers × tokens`);

  // LRP: each token's AttnLRP and CP-LRP under the maps, as --lrp gives them.
  await page.check("#lrp");
  await explained(() => page.click("#explain"));
  for (const score of ["attnlrp", "cp_lrp"]) {
    const values = await page.$$eval(`[data-pane='0'] table.importance tr[data-score=${score}] td`,
      (tds) => tds.map((td) => Number(td.dataset.value)));
    compare(values, expected.lrp.importance[score], score);
  }
  seen.lrp = true;

  // The head view at layer 1: every head draws lines; hiding a head removes its lines.
  const perHead = await page.$$eval("#heads line", (lines) => {
    const counts = {};
    for (const l of lines) counts[l.dataset.head] = (counts[l.dataset.head] || 0) + 1;
    return counts;
  });
  seen.head_lines = perHead;
  for (let h = 0; h < expected.heads; h++) check((perHead[h] || 0) > 0, `head ${h + 1} draws no line`);
  await page.click("#head-toggles input[data-head='0']");
  const hidden = await page.$$eval("#heads line[data-head='0']", (lines) => lines.length);
  check(hidden === 0, `head 1 still draws ${hidden} lines once hidden`);

  // Back to attention flow at the last layer; click a token: that position is explained.
  await explained(() => page.selectOption("#mixing", "attention"));
  await explained(() => page.selectOption("#aggregation", "flow"));
  await explained(async () => {
    await page.$eval("#layer", (input, l) => { input.value = String(l); input.dispatchEvent(new Event("input")); }, L);
  });
  await explained(() => page.click(`[data-pane='0'] .token[data-index='${expected.click}']`));
  const target = await page.$eval("[data-pane='0'] .token.target", (s) => Number(s.dataset.index));
  check(target === expected.click, `the clicked token ${expected.click} is not the target (${target})`);
  compare(await shown(), expected.clicked.relevance.flow[L - 1], `flow from the clicked token`);

  // Compare two texts.
  await page.check("#compare");
  await page.fill("#text-b", expected.second);
  await explained(() => page.click("#explain"));
  const panes = await page.$$eval(".pane", (p) => p.length);
  check(panes === 2, `${panes} panes when comparing two texts`);

  await page.screenshot({ path: screenshot, fullPage: true });
  check(errors.length === 0, `errors: ${errors.join("; ")}`);
  check(requests.length === 0, `requests outside the server: ${requests.join(", ")}`);
  seen.panes = panes;
} catch (e) {
  failures.push(`the page failed: ${e.message}`);
  const page = browser.pages()[0];
  if (page) failures.push(`the page says: ${await page.$eval("#error", (p) => p.textContent).catch(() => "")}`);
  failures.push(...pageErrors);
} finally {
  await closeBrowser();
}
finish(seen);
