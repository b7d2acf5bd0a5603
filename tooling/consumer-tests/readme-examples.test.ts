import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { repositoryRoot, runCommand, strictTsconfig, tscPath } from './consumer.js';

/** Marks a block that is deliberately not compiled; the reason is required. */
const OPT_OUT = /^<!--\s*not compiled:\s*(\S.*?)\s*-->$/;

interface Example {
  readme: string;
  index: number;
  line: number;
  code: string;
  skipped?: string;
}

/** The ```ts blocks of the root README and of every package README. */
function examples(): Example[] {
  const readmes = ['README.md'];
  for (const folder of readdirSync(path.join(repositoryRoot, 'packages')).sort()) {
    if (existsSync(path.join(repositoryRoot, 'packages', folder, 'README.md'))) readmes.push(`packages/${folder}/README.md`);
  }
  const found: Example[] = [];
  for (const readme of readmes) {
    const lines = readFileSync(path.join(repositoryRoot, readme), 'utf8').split('\n');
    let index = 0;
    for (let start = 0; start < lines.length; start += 1) {
      if (!/^```(ts|typescript)\s*$/.test(lines[start] as string)) continue;
      const end = lines.findIndex((line, at) => at > start && /^```\s*$/.test(line));
      let previous = start - 1;
      while (previous >= 0 && (lines[previous] as string).trim() === '') previous -= 1;
      const optOut = OPT_OUT.exec((lines[previous] ?? '').trim());
      index += 1;
      found.push({ readme, index, line: start + 1, code: lines.slice(start + 1, end).join('\n'), ...(optOut ? { skipped: optOut[1] } : {}) });
      start = end;
    }
  }
  return found;
}

const all = examples();
const compiled = all.filter((example) => example.skipped === undefined);
const app = inject('appDirectory');

/** Workers code sees the Workers runtime's globals; everything else a browser's and Node's. */
const isWorkers = (example: Example) => example.readme.includes('adapter-workers');
const fileOf = (example: Example) => `readme/${example.readme.replace(/\/?README\.md$/, '').replace(/[^\w]+/g, '-') || 'root'}-${example.index}.ts`;

describe('README examples', () => {
  it('are found, and the few left out say why', () => {
    expect(compiled.length).toBeGreaterThanOrEqual(8);
    expect(all.filter((example) => example.skipped !== undefined).length).toBeLessThanOrEqual(2);
  });

  for (const [group, members, options] of [
    ['node-and-browser', compiled.filter((example) => !isWorkers(example)), { types: ['node'] }],
    ['workers', compiled.filter(isWorkers), { lib: ['ES2023'], types: ['@cloudflare/workers-types'] }],
  ] as const) {
    it(`type-check under strict against the packed packages (${group}: ${members.map((example) => `${example.readme}#${example.index}`).join(', ')})`, () => {
      expect(inject('appInstallFailure')).toBe('');
      mkdirSync(path.join(app, 'readme'), { recursive: true });
      for (const example of members) writeFileSync(path.join(app, fileOf(example)), `${example.code}\n`);
      const config = `tsconfig.readme-${group}.json`;
      writeFileSync(path.join(app, config), strictTsconfig(members.map(fileOf), options));
      const result = runCommand(process.execPath, [tscPath, '-p', config], app);
      // Name each failing block by its README and line, not by the generated file.
      const report = result.output.replace(/readme\/([\w-]+)-(\d+)\.ts\((\d+),(\d+)\)/g, (match, _name, _index, line, column) => {
        const example = members.find((candidate) => fileOf(candidate) === match.slice(0, match.indexOf('(')));
        return example ? `${example.readme}:${example.line + Number(line)}:${column}` : match;
      });
      expect(report).toBe('');
      expect(result.status).toBe(0);
    });
  }
});
