// The headless Chromium every browser check drives: Debian's /usr/bin/chromium (or
// $CHROMIUM) through playwright-core, on a fresh profile, with nothing in the background
// that would reach the network.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

// The script's `count` arguments; without them, prints `usage` and exits 2.
export function args(usage, count) {
  const given = process.argv.slice(2, 2 + count);
  if (given.length < count || given.some((a) => !a)) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return given;
}

// `check(ok, message)` keeps the message of each check that fails in `failures`;
// `finish(seen)` prints what the script saw as one JSON line and exits 1 with the reasons
// when a check failed.
export function checks() {
  const failures = [];
  const check = (ok, message) => { if (!ok) failures.push(message); };
  const finish = (seen) => {
    console.log(JSON.stringify(seen));
    if (failures.length > 0) {
      console.error(failures.join("\n"));
      process.exit(1);
    }
  };
  return { failures, check, finish };
}

// Whether two numbers agree to 1e-9, relative or absolute.
export const near = (a, b) => Math.abs(a - b) <= 1e-9 + 1e-9 * Math.abs(b);

// A fresh browser, and `close()`, which also removes its profile.
export async function launch(viewport) {
  const profile = mkdtempSync(join(tmpdir(), "bert-explain-chromium-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const close = async () => {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { browser, close };
}

// A saved HTML page opened in a new tab and drawn, with what it must not do collected as
// watch collects it (only the file itself and data: addresses are allowed).
export async function openFile(browser, path) {
  const page = await browser.newPage();
  const url = pathToFileURL(resolve(path)).href;
  const watched = watch(page, (u) => u === url || u.startsWith("data:"));
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready=true]", { timeout: 10000 });
  return { page, ...watched };
}

// Collects what a page must not do into `errors` and `requests`: console errors and
// warnings, uncaught errors, and requests whose address `allowed` refuses.
export function watch(page, allowed, errors = [], requests = []) {
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") errors.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("request", (r) => { if (!allowed(r.url())) requests.push(r.url()); });
  return { errors, requests };
}
