// The headless Chromium every browser check drives: Debian's /usr/bin/chromium (or
// $CHROMIUM) through playwright-core, on a fresh profile, with nothing in the background
// that would reach the network.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

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

// Collects what a page must not do into `errors` and `requests`: console errors and
// warnings, uncaught errors, and requests whose address `allowed` refuses.
export function watch(page, allowed, errors = [], requests = []) {
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") errors.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("request", (r) => { if (!allowed(r.url())) requests.push(r.url()); });
  return { errors, requests };
}
