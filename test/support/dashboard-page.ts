import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

/** Where this run's dashboard screenshots go: a temp dir of its own, and IDMINT_SHOTS_DIR too when set (for an issue's note). */
const SHOTS = mkdtempSync(join(tmpdir(), 'idmint-dashboard-shots-'));

/** Saves a screenshot of what the window shows (the top of the page) as `<name>.png`; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path });
  const copy = process.env.IDMINT_SHOTS_DIR;
  if (copy) {
    mkdirSync(copy, { recursive: true });
    copyFileSync(path, join(copy, `${name}.png`));
  }
  return path;
}

/** An element's colour as drawn (the CSS applied), e.g. 'rgb(198, 40, 40)'. */
export async function colourOf(page: Page, selector: string, property: 'color' | 'backgroundColor' = 'color'): Promise<string> {
  return page
    .locator(selector)
    .first()
    .evaluate((el, p) => (globalThis as unknown as { getComputedStyle(e: unknown): Record<string, string> }).getComputedStyle(el)[p]!, property);
}

/** The page's red (a server down, a silent process) and grey (a stopped process). */
export const RED = 'rgb(198, 40, 40)';
export const GREY = 'rgb(158, 158, 158)';
