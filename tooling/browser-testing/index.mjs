// Launches the machine's Chromium for tests and bundles TypeScript entry points for the page.
import { existsSync } from 'node:fs';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';

export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The Chromium binary: `CHROMIUM_PATH`, else Debian's `/usr/bin/chromium`. */
export function chromiumPath() {
  return process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
}

/** Starts a headless Chromium; fails with the install command when there is none. */
export async function launchChromium() {
  const executablePath = chromiumPath();
  if (!existsSync(executablePath)) {
    throw new Error(
      `No Chromium at ${executablePath}. Install it with "apt-get install -y chromium" or set CHROMIUM_PATH.`,
    );
  }
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_FLAGS });
}

/** Bundles `entry` (and everything it imports) into one ES module for the page. */
export async function bundleForBrowser(entry, options = {}) {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    sourcemap: 'inline',
    conditions: ['browser', 'import'],
    logOverride: { 'ignored-bare-import': 'silent' },
    ...options,
  });
  return result.outputFiles[0].text;
}
