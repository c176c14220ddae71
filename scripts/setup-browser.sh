#!/usr/bin/env bash
# Installs what tests/report_html.rs needs to check the HTML report in a real browser:
# Debian's headless Chromium (/usr/bin/chromium, via apt-get) and playwright-core (npm ci in
# tests/browser, pinned by its package-lock.json). No browser download from the Playwright CDN.
#
# Usage: scripts/setup-browser.sh      (idempotent; needs root or sudo only to install packages)
# Set CHROMIUM to use another Chromium binary.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
chromium="${CHROMIUM:-/usr/bin/chromium}"

die() {
    echo "setup-browser: error: $*" >&2
    exit 1
}

apt_install() {
    command -v apt-get >/dev/null 2>&1 ||
        die "apt-get not found: install $* with your package manager (or set CHROMIUM)"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "installing $* needs root (or sudo)"
        sudo=(sudo)
    fi
    echo "setup-browser: installing $* with apt-get" >&2
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@"
}

missing=()
[[ -x "$chromium" ]] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]} > 0)); then
    apt_install "${missing[@]}"
fi
[[ -x "$chromium" ]] || die "$chromium still missing after installing chromium; set CHROMIUM"

cd "$repo/tests/browser"
want="$(node -p 'require("./package-lock.json").packages["node_modules/playwright-core"].version')"
have="$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch { "" }')"
if [[ "$want" != "$have" ]]; then
    echo "setup-browser: npm ci in tests/browser (playwright-core $want)" >&2
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
fi
echo "setup-browser: ready: $("$chromium" --version 2>/dev/null | head -n1), node $(node --version), playwright-core $want" >&2
