/**
 * Headless Chromium for tests that look at the Temporal Web UI: Debian's chromium package (scripts/setup-browser.sh
 * installs it) driven by playwright-core, or the build ADCP_CHROMIUM_PATH names. A missing browser is a failure that
 * says how to install one, never a skipped test.
 */
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { type Browser, chromium } from 'playwright-core';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

/** The Chromium executable to drive; throws naming scripts/setup-browser.sh when there is none. */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.ADCP_CHROMIUM_PATH?.trim();
  const candidates = configured ? [configured] : CANDIDATES;
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // try the next one
    }
  }
  throw new Error(
    `No Chromium for the Web UI browser test (looked for ${candidates.join(', ')}). ` +
      `Run scripts/setup-browser.sh (installs Debian's chromium package), or set ADCP_CHROMIUM_PATH to a Chromium executable.`,
  );
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), headless: true });
}

/** Where tests leave screenshots for people to look at (git-ignored tmp/ at the repository root). */
export function screenshotPath(name: string): string {
  return path.resolve(__dirname, '..', '..', 'tmp', name);
}

/** `rgb(r, g, b)` / `rgba(...)` as numbers. */
export function parseCssColor(color: string): [number, number, number] {
  const match = /rgba?\((\d+),\s*(\d+),\s*(\d+)/.exec(color);
  if (!match) throw new Error(`Not an rgb() colour: ${color}`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}
