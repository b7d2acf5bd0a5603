import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The database client packages a fresh process has loaded after importing `specifier` (and creating an object). */
async function clientsLoadedBy(specifier: string, use = ''): Promise<string[]> {
  const script = `
    const module = await import(${JSON.stringify(specifier)});
    ${use}
    const { createRequire } = await import('node:module');
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    const names = new Set(loaded.flatMap((file) => /node_modules\\/(redis|@redis\\/client|pg|pg-pool)\\//.exec(file)?.[1] ?? []));
    console.log(JSON.stringify([...names].sort()));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: packageRoot });
  return JSON.parse(stdout) as string[];
}

describe('entry points', () => {
  it('loads no database client for the main entry, and each subpath only its own client when it connects', async () => {
    expect(await clientsLoadedBy('@org/adapter-node')).toEqual([]);
    // Creating a store does not connect yet; nothing is loaded before the first operation.
    expect(await clientsLoadedBy('@org/adapter-node/redis', `module.createRedisInteractionStore({ url: 'redis://127.0.0.1:1' });`)).toEqual([]);
    expect(await clientsLoadedBy('@org/adapter-node/postgres', `module.createPostgresInteractionStore({ url: 'postgres://127.0.0.1:1/x' });`)).toEqual([]);
    expect(
      await clientsLoadedBy(
        '@org/adapter-node/postgres',
        `const store = module.createPostgresInteractionStore({ url: 'postgres://127.0.0.1:1/x' }); await store.get('i').catch(() => {}); await store.close();`,
      ),
    ).toEqual(['pg', 'pg-pool']);
    expect(
      await clientsLoadedBy(
        '@org/adapter-node/redis',
        `const store = module.createRedisInteractionStore({ url: 'redis://127.0.0.1:1' }); await store.get('i').catch(() => {}); await store.close();`,
      ),
    ).toEqual(['@redis/client', 'redis']);
  }, 30_000);
});
