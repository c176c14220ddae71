// Drives `bert-explain serve`'s explorer for a classifier and for a causal model in headless
// Chromium (as check-explorer.mjs does for a masked LM): on the classifier, picking a label
// explains that label (grad-attention's flow on the page equals the command line's with
// --evaluate --label); on the causal model, the head view draws every head's lines over the
// prompt and the generated tokens but the last. No console errors and no request leaves the
// servers.
//
// Usage: node check-explorer-tasks.mjs CLASSIFIER_URL CAUSAL_URL EXPECTED.json
//   EXPECTED.json: {"classifier": {"text", "label": id, "name": label name, "layers",
//   "labelled": report}, "causal": {"prompt", "generate", "heads", "fed": [tokens]}}
// Prints one JSON line with what it saw; exits 1 with the reasons when a check fails.
import { readFileSync } from "node:fs";
import { args, checks, launch, near, watch } from "./chromium.mjs";

const [classifierUrl, causalUrl, expectedPath] =
  args("node check-explorer-tasks.mjs CLASSIFIER_URL CAUSAL_URL EXPECTED.json", 3);
const expected = JSON.parse(readFileSync(expectedPath, "utf8"));
const { failures, check, finish } = checks();
const { browser, close: closeBrowser } = await launch({ width: 1280, height: 1000 });
const seen = {};
const errors = [];
const requests = [];

// A fresh page on `url`, started; `explained(action)` waits for the page to draw again.
async function open(url) {
  const page = await browser.newPage();
  watch(page, (u) => u.startsWith(url), errors, requests);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-started=true]", { timeout: 10000 });
  const explained = async (action) => {
    await page.evaluate(() => { document.body.dataset.ready = "false"; });
    await action();
    await page.waitForSelector("body[data-ready=true]", { timeout: 20000 });
  };
  return { page, explained };
}

try {
  // The classifier: explain, then pick a label that is not the top one.
  const want = expected.classifier;
  const { page, explained } = await open(classifierUrl);
  await page.fill("#text-a", want.text);
  await explained(() => page.click("#explain"));
  await explained(() => page.click(`[data-pane='0'] button.pick-label[data-label='${want.label}']`));
  const said = await page.$eval("[data-pane='0'] .explained-label", (p) => p.textContent);
  check(said.includes(`“${want.name}”`), `the page says ${JSON.stringify(said)}, not the label ${want.name}`);
  await explained(() => page.selectOption("#mixing", "grad-attention"));
  await explained(() => page.selectOption("#aggregation", "flow"));
  const shown = await page.$$eval("[data-pane='0'] .token[data-index]", (spans) => spans.map((s) => Number(s.dataset.value)));
  const flow = want.labelled.methods["grad-attention"].flow[want.layers - 1];
  check(shown.length === flow.length, `${shown.length} tokens on the page, ${flow.length} in the report`);
  shown.forEach((g, j) => check(near(g, flow[j]), `grad-attention flow for label ${want.name}: token ${j} shows ${g}, the report has ${flow[j]}`));
  seen.classifier = { label: said, tokens: shown.length };

  // The causal model: the head view over the fed positions.
  const gen = expected.causal;
  const causal = await open(causalUrl);
  await causal.page.fill("#text-a", gen.prompt);
  await causal.page.fill("#generate", String(gen.generate));
  await causal.explained(() => causal.page.click("#explain"));
  check(!(await causal.page.isHidden("#head-view")), "a causal model's head view is hidden");
  const labels = await causal.page.$$eval("#heads text", (texts) => texts.map((t) => t.textContent));
  const left = labels.filter((_, k) => k % 2 === 0);
  check(JSON.stringify(left) === JSON.stringify(gen.fed), `the head view's tokens ${JSON.stringify(left)}, not ${JSON.stringify(gen.fed)}`);
  const perHead = await causal.page.$$eval("#heads line", (lines) => {
    const counts = {};
    for (const l of lines) counts[l.dataset.head] = (counts[l.dataset.head] || 0) + 1;
    return counts;
  });
  for (let h = 0; h < gen.heads; h++) check((perHead[h] || 0) > 0, `causal head ${h + 1} draws no line`);
  seen.causal = { tokens: left.length, head_lines: perHead };
  check(errors.length === 0, `errors: ${errors.join("; ")}`);
  check(requests.length === 0, `requests outside the servers: ${requests.join(", ")}`);
} catch (e) {
  failures.push(`the page failed: ${e.message}`, ...errors);
} finally {
  await closeBrowser();
}
finish(seen);
