import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createConsumer, publishedPackages, repositoryRoot, runCommand, strictTsconfig, tscPath, type Consumer } from './consumer.js';
import { LOWEST_ZOD, NEWEST_ZOD, ZOD_3 } from './zod-versions.js';

const example = readFileSync(path.join(import.meta.dirname, 'fixtures/define-function.ts'), 'utf8');
const created: string[] = [];
afterAll(() => {
  for (const directory of created) rmSync(directory, { recursive: true, force: true });
});

function consumer(name: string, zod: string, legacyPeerDeps = false): Consumer {
  const project = createConsumer(name, {
    tarballs: inject('tarballs'),
    packages: ['@org/core'],
    dependencies: { zod },
    legacyPeerDeps,
    files: {
      'define-function.ts': example,
      'tsconfig.json': strictTsconfig(['define-function.ts'], { noEmit: false, outDir: 'out' }),
    },
  });
  created.push(project.directory);
  return project;
}

describe('the zod peer range', () => {
  it(`is ^${LOWEST_ZOD} in every published package whose types show zod, and the runtime check says the same`, () => {
    for (const { name, manifest } of publishedPackages()) {
      expect({ name, peer: manifest.peerDependencies?.zod, dependency: manifest.dependencies?.zod }).toEqual({
        name,
        peer: `^${LOWEST_ZOD}`,
        dependency: undefined,
      });
    }
    const check = readFileSync(path.join(repositoryRoot, 'packages/core/src/protocol/zod-version.ts'), 'utf8');
    expect(check).toContain(`SUPPORTED_ZOD_RANGE = '^${LOWEST_ZOD}'`);
  });
});

describe.each([LOWEST_ZOD, '4.1.13', NEWEST_ZOD])('an app on zod %s', (zod) => {
  let project: Consumer;
  beforeAll(() => {
    project = consumer(`zod-${zod}`, zod);
  });

  it('installs @org/core next to its own zod, with no second copy', () => {
    expect(project.install.output).not.toMatch(/ERESOLVE/);
    expect(project.install.status).toBe(0);
    const installed = JSON.parse(readFileSync(path.join(project.directory, 'node_modules/zod/package.json'), 'utf8'));
    expect(installed.version).toBe(zod);
    const nested = runCommand('node', ['-e', "console.log(require('node:fs').existsSync('node_modules/@org/core/node_modules/zod'))"], project.directory);
    expect(nested.output.trim()).toBe('false');
  });

  it('type-checks a defineFunction example under strict, declarations of the packages included', () => {
    const result = runCommand(process.execPath, [tscPath, '-p', '.'], project.directory);
    expect(result.output).toBe('');
    expect(result.status).toBe(0);
  });

  it('runs it: the scripted model calls the function, bad arguments go back to the model, the run completes', () => {
    const result = runCommand(process.execPath, ['out/define-function.js'], project.directory);
    expect(result.status, result.output).toBe(0);
    const printed = JSON.parse(result.output);
    expect(printed.declaration.parametersJsonSchema).toMatchObject({
      type: 'object',
      properties: { city: { type: 'string', minLength: 1, description: 'The city' }, unit: { enum: ['C', 'F'], default: 'C' } },
      required: ['city'],
    });
    expect(printed.declared).toBe(true);
    expect(printed.results[0].error).toMatch(/^Invalid arguments for get_weather: city: /);
    expect(printed.results[1]).toEqual({ city: 'LISBON', unit: 'C', temperature: 21 });
    expect(printed.success).toBe(true);
  });
});

describe(`an app on zod ${ZOD_3}`, () => {
  it('is refused by npm: the peer range says zod 4', () => {
    const project = consumer('zod-3-strict', ZOD_3);
    expect(project.install.status).not.toBe(0);
    expect(project.install.output).toMatch(/ERESOLVE/);
    expect(project.install.output).toMatch(/peer zod@"\^4\.0\.0"/);
  });

  it('installed anyway (pnpm and yarn only warn), fails on import with an AgentError naming both versions', () => {
    const project = consumer('zod-3', ZOD_3, true);
    expect(project.install.status, project.install.output).toBe(0);
    for (const specifier of ['@org/core', '@org/core/http']) {
      const script = `import(${JSON.stringify(specifier)}).then(() => console.log('loaded'), (error) => console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message, details: error.details })))`;
      const result = runCommand(process.execPath, ['-e', script], project.directory);
      expect(JSON.parse(result.output)).toEqual({
        name: 'AgentError',
        code: 'INTERNAL',
        message: expect.stringMatching(/needs zod \^4\.0\.0 .* is 3\.x or older/),
        details: { zodFound: '3.x or older', zodSupported: '^4.0.0' },
      });
    }
  });
});
