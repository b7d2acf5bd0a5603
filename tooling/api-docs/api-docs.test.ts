import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs module without declarations.
import { exportsByEntryPoint } from './list-exports.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `docs/api.md`: `## \`specifier\`` headings, each followed by `- \`name\` …` lines. */
function documentedNames(): Map<string, string[]> {
  const text = readFileSync(path.join(root, 'docs/api.md'), 'utf8');
  const sections = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.split('\n')) {
    const heading = /^## `([^`]+)`/.exec(line);
    if (heading) {
      current = [];
      sections.set(heading[1] as string, current);
      continue;
    }
    const item = /^- `([A-Za-z_$][\w$]*)`/.exec(line);
    if (item && current) current.push(item[1] as string);
  }
  for (const names of sections.values()) names.sort();
  return sections;
}

describe('docs/api.md', () => {
  const actual = exportsByEntryPoint() as Map<string, string[]>;
  const documented = documentedNames();

  it('has a section for every published entry point, and none for an entry point that does not exist', () => {
    expect([...documented.keys()].sort()).toEqual([...actual.keys()].sort());
  });

  for (const [specifier, names] of actual) {
    it(`names every export of ${specifier}, and nothing it does not export`, () => {
      const listed = documented.get(specifier) ?? [];
      const undocumented = names.filter((name) => !listed.includes(name));
      const stale = listed.filter((name) => !names.includes(name));
      expect({ undocumented, stale }).toEqual({ undocumented: [], stale: [] });
    });
  }
});
