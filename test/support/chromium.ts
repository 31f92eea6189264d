import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** Headless Chromium from Debian (scripts/ensure-chromium.sh finds or installs it), quiet: no background requests of its own. */
export async function launchChromium(): Promise<Browser> {
  const executablePath = execFileSync('bash', [`${ROOT}scripts/ensure-chromium.sh`], { encoding: 'utf8' }).trim();
  return chromium.launch({ executablePath, headless: true, args: FLAGS });
}
