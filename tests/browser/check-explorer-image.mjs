// Drives `bert-explain serve`'s explorer for an image model in headless Chromium: choosing
// an image file and pressing Explain draws the report's page in a frame (the picture under
// its patches, the method switch, the layer slider, the row of overlays by layer), with the
// command line's numbers; the slider in the frame changes the patches' tints; with LRP
// ticked, the page's row of relevance overlays. No console
// errors and no request leaves the server. Writes a screenshot.
//
// Usage: node check-explorer-image.mjs URL IMAGE EXPECTED.json SCREENSHOT.png
//   EXPECTED.json: the command line's --json report for IMAGE.
// Prints one JSON line with what it saw; exits 1 with the reasons when a check fails.
import { readFileSync } from "node:fs";
import { args, checks, launch, watch } from "./chromium.mjs";

const [url, image, expectedPath, screenshot] =
  args("node check-explorer-image.mjs URL IMAGE EXPECTED.json SCREENSHOT.png", 4);
const expected = JSON.parse(readFileSync(expectedPath, "utf8"));
const { failures, check, finish } = checks();
const { browser, close } = await launch({ width: 1280, height: 1400 });
const errors = [];
const requests = [];
let seen = {};
try {
  const page = await browser.newPage();
  watch(page, (u) => u.startsWith(url) || u.startsWith("data:") || u === "about:srcdoc", errors, requests);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-started=true]", { timeout: 10000 });
  check(await page.isHidden("#text-a"), "the text box shows for an image model");
  await page.setInputFiles("#image", image);
  await page.click("#explain");
  const frame = page.frameLocator("#image-page");
  await frame.locator("body[data-ready=true]").waitFor({ timeout: 20000 });
  const [rows, cols] = expected.image.grid;
  const patches = await frame.locator("#picture .patch").count();
  check(patches === rows * cols, `${patches} patches in the frame, want ${rows * cols}`);
  const layers = expected.layers;
  const flow = expected.relevance.flow[layers - 1];
  const want = flow[flow.length - 1].toFixed(4);
  const title = await frame.locator(`#picture .patch[data-patch="${rows * cols - 1}"]`).getAttribute("title");
  check(title && title.endsWith(`: ${want}`), `the last patch says ${JSON.stringify(title)}, want the command line's ${want}`);
  const tints = () => frame.locator("#picture .patch").evaluateAll((cells) => cells.map((c) => c.style.background));
  const before = await tints();
  await frame.locator("#method-raw").check();
  const after = await tints();
  check(JSON.stringify(after) !== JSON.stringify(before), "switching the method in the frame did not change the tints");
  check(await page.isVisible("#image-view .downloads"), "the downloads are not offered");
  // LRP ticked: the frame's page gains a row of overlays, AttnLRP's and CP-LRP's.
  check(await page.isVisible("#lrp"), "LRP is not offered for an image classifier");
  await page.check("#lrp");
  await page.click("#explain");
  await frame.locator("#importance .scores figure").first().waitFor({ timeout: 20000 });
  const scores = await frame.locator("#importance .scores figure").count();
  check(scores === 2, `${scores} relevance overlays in the frame, want 2 (AttnLRP, CP-LRP)`);
  await page.screenshot({ path: screenshot, fullPage: true });
  check(errors.length === 0, `console errors: ${errors.join("; ")}`);
  check(requests.length === 0, `requests beyond the server: ${requests.join(", ")}`);
  seen = { patches, title, scores, errors, requests, screenshot };
} catch (e) {
  failures.push(`browser check crashed: ${e.stack || e}`);
} finally {
  await close();
}
finish(seen);
