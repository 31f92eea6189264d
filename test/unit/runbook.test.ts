import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// Every alert an on-call engineer receives links to what to do: its runbook_url is a section of
// docs/operations.md that exists, in monitoring/alerts.yml and in the chart's copy of it.
const RUNBOOK = 'https://github.com/idmint/idmint/blob/main/docs/operations.md#';
const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

interface Rule {
  alert?: string;
  annotations?: Record<string, string>;
}

function alertsIn(path: string): Rule[] {
  const doc = parse(read(path)) as { groups: { rules: Rule[] }[] };
  return doc.groups.flatMap((g) => g.rules).filter((r) => r.alert);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

const anchors = new Set(
  read('docs/operations.md')
    .split('\n')
    .filter((line) => /^#{1,6} /.test(line))
    .map((line) => anchorOf(line.replace(/^#+ /, ''))),
);

describe('alert runbooks', () => {
  it.each(['monitoring/alerts.yml', 'deploy/helm/idmint/files/alerts.yml'])('every alert in %s links to its section of docs/operations.md', (path) => {
    const rules = alertsIn(path);
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) {
      const url = rule.annotations?.runbook_url ?? '';
      expect(url, `${rule.alert} has a runbook_url`).toMatch(new RegExp(`^${RUNBOOK.replace(/[.?]/g, '\\$&')}[a-z0-9-]+$`));
      const anchor = url.slice(RUNBOOK.length);
      expect(anchors.has(anchor), `${rule.alert}: docs/operations.md has no heading for #${anchor}`).toBe(true);
      // Its own section, named after it, so the link lands on the alert and not on a neighbour.
      expect(anchor).toBe(anchorOf(rule.alert!));
    }
  });

  it('computes anchors as GitHub does', () => {
    expect(anchorOf('Redis down (one server)')).toBe('redis-down-one-server');
    expect(anchorOf('`/readyz`: what it says')).toBe('readyz-what-it-says');
  });
});
