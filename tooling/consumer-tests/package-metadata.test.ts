import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { publishedPackages, repositoryRoot } from './consumer.js';

const app = inject('appDirectory');
const license = readFileSync(path.join(repositoryRoot, 'LICENSE'), 'utf8');

describe.each(publishedPackages().map(({ name, folder }) => [name, folder] as const))('%s as installed from its tarball', (name, folder) => {
  const installed = path.join(app, 'node_modules', name);
  const manifest = () => JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8'));

  it('ships the Apache-2.0 LICENSE of the repository and its README', () => {
    expect(manifest().license).toBe('Apache-2.0');
    expect(readFileSync(path.join(installed, 'LICENSE'), 'utf8')).toBe(license);
    expect(existsSync(path.join(installed, 'README.md'))).toBe(true);
    expect(existsSync(path.join(installed, 'src'))).toBe(false);
  });

  it('names its repository folder, homepage and issue tracker', () => {
    const { repository, homepage, bugs } = manifest();
    expect(repository).toEqual({ type: 'git', url: 'git+https://github.com/org/agent-runtime.git', directory: `packages/${folder}` });
    expect(homepage).toBe(`https://github.com/org/agent-runtime/tree/main/packages/${folder}#readme`);
    expect(bugs).toEqual({ url: 'https://github.com/org/agent-runtime/issues' });
  });

  it('resolves every entry point by types, import and default, in that order', () => {
    for (const [subpath, target] of Object.entries(manifest().exports as Record<string, unknown>)) {
      if (subpath === './package.json') continue;
      expect(Object.keys(target as object)).toEqual(['types', 'import', 'default']);
    }
  });

  it('asks for Node 20.19 only where its code runs on Node (workerd and browsers have no Node version)', () => {
    const runsOnNode = ['@org/core', '@org/adapter-node'].includes(name);
    expect(manifest().engines).toEqual(runsOnNode ? { node: '>=20.19' } : undefined);
  });

  it('depends on no workspace protocol and carries no zod of its own', () => {
    const { dependencies = {}, peerDependencies = {} } = manifest();
    expect(Object.values(dependencies).filter((version) => String(version).startsWith('workspace:'))).toEqual([]);
    expect(dependencies.zod).toBeUndefined();
    expect(peerDependencies.zod).toBe('^4.0.0');
  });
});
