import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function* sourceFiles(directory: string): Generator<string> {
  for (const name of readdirSync(directory)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const file = path.join(directory, name);
    if (statSync(file).isDirectory()) yield* sourceFiles(file);
    else if (/\.(ts|tsx|mts|mjs|js)$/.test(name)) yield file;
  }
}

describe('source comments', () => {
  it('cite no section of a document outside the repository (they name the behaviour, or a doc in docs/)', () => {
    const citations: string[] = [];
    for (const top of ['packages', 'tooling']) {
      for (const file of sourceFiles(path.join(root, top))) {
        if (file === fileURLToPath(import.meta.url)) continue;
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, index) => {
            // Public standards (RFC 9110 §7.6.1) are fine; sections of design notes are not.
            if (/§/.test(line) && !/RFC \d+ §/.test(line)) citations.push(`${path.relative(root, file)}:${index + 1}: ${line.trim()}`);
            if (/\breference (§|Appendix|Q\d)/i.test(line) || /ARCHITECTURE\.md|opal-backend-spec/.test(line)) citations.push(`${path.relative(root, file)}:${index + 1}: ${line.trim()}`);
          });
      }
    }
    expect(citations).toEqual([]);
  });
});
