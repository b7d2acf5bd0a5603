import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { publishedPackages, runCommand, strictTsconfig, tscPath } from './consumer.js';

const app = inject('appDirectory');
const installFailure = inject('appInstallFailure');

/** Every entry point of every published package, as a user would name it. */
const specifiers = publishedPackages().flatMap(({ name, manifest }) =>
  Object.keys(manifest.exports as Record<string, unknown>)
    .filter((subpath) => subpath !== './package.json')
    .map((subpath) => (subpath === '.' ? name : `${name}/${subpath.slice(2)}`)),
);

// `@org/adapter-workers` imports `cloudflare:workers`, which only workerd provides: it loads in no
// Node program, by `import` or by `require`. Node can still resolve it by either condition.
const loadsInNode = (specifier: string) => !specifier.startsWith('@org/adapter-workers');

describe('require() from a CommonJS program (Node >= 20.19 loads ES modules)', () => {
  it('the app installed', () => {
    expect(installFailure).toBe('');
  });

  it.each(specifiers.filter(loadsInNode))('require(%j) returns the module and its exports', (specifier) => {
    const script = `const m = require(${JSON.stringify(specifier)}); const names = Object.keys(m); if (names.length === 0) throw new Error('no exports'); console.log(names.length);`;
    const result = runCommand(process.execPath, ['-e', script], app);
    expect(result.output).toMatch(/^\d+\n$/);
    expect(result.status).toBe(0);
  });

  it('require("@org/core") gives the same functions as import', () => {
    const script = `const core = require('@org/core'); import('@org/core').then((esm) => console.log(core.run === esm.run && core.defineFunction === esm.defineFunction));`;
    expect(runCommand(process.execPath, ['-e', script], app).output.trim()).toBe('true');
  });

  it.each(specifiers.filter((specifier) => !loadsInNode(specifier)))('require.resolve(%j) finds the package', (specifier) => {
    const result = runCommand(process.execPath, ['-e', `console.log(require.resolve(${JSON.stringify(specifier)}))`], app);
    expect(result.output.trim()).toMatch(/node_modules\/@org\/adapter-workers\/dist\/index\.js$/);
  });

  it('a CommonJS TypeScript file type-checks `import x = require(...)` of every Node entry point', () => {
    const lines = specifiers
      .filter(loadsInNode)
      .map((specifier, index) => `import entry${index} = require(${JSON.stringify(specifier)});\nvoid entry${index};`);
    lines.push("import core = require('@org/core');\nconst start: typeof core.run = core.run;\nvoid start;");
    writeFileSync(path.join(app, 'require-check.cts'), `${lines.join('\n')}\n`);
    writeFileSync(path.join(app, 'tsconfig.require.json'), strictTsconfig(['require-check.cts'], { types: ['node'] }));
    const result = runCommand(process.execPath, [tscPath, '-p', 'tsconfig.require.json'], app);
    expect(result.output).toBe('');
    expect(result.status).toBe(0);
  });
});
