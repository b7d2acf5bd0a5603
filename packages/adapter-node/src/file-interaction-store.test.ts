import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { describeInteractionStoreConformance } from '@org/core/testing';
import { createFileInteractionStore } from './file-interaction-store.js';

const folders: string[] = [];
async function freshFolder(): Promise<string> {
  const folder = await mkdtemp(path.join(os.tmpdir(), 'org-file-store-'));
  folders.push(folder);
  return folder;
}
afterAll(async () => {
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

describeInteractionStoreConformance('file', async (options) => createFileInteractionStore({ directory: await freshFolder(), ...options }), {
  describe,
  it,
  expect,
});

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/index.js');

describe('file interaction store', () => {
  it('refuses ids that could escape the folder, naming the id and not the folder', async () => {
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory });
    const error = await store.set('../evil', { meta: '{}', state: '1' }, null).catch((caught: unknown) => caught as Error);
    expect(error).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('Interaction id "../evil"') });
    expect((error as Error).message).not.toContain(directory);
  });

  it('lets exactly one of two processes claim each interaction', async () => {
    const directory = await freshFolder();
    const ids = Array.from({ length: 20 }, (_, index) => `race-${index}`);
    const store = createFileInteractionStore({ directory });
    for (const id of ids) await store.set(id, { meta: '{"owner":"alice"}', state: JSON.stringify({ id }) }, null);
    // Each process tries to take a lease on every id, 10 times over, as the runtime's claim does.
    const script = `
      const { createFileInteractionStore } = await import(${JSON.stringify(dist)});
      const store = createFileInteractionStore({ directory: ${JSON.stringify(directory)} });
      const ids = ${JSON.stringify(ids)};
      const won = [];
      await Promise.all(ids.flatMap((id) => Array.from({ length: 10 }, async () => {
        const record = await store.get(id);
        const meta = JSON.parse(record.meta);
        if (meta.lease) return;
        const version = await store.set(id, { meta: JSON.stringify({ ...meta, lease: { token: String(process.pid), until: Date.now() + 60000 } }) }, record.version);
        if (version !== undefined) won.push(id);
      })));
      console.log(JSON.stringify(won));`;
    const run = () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    const [first, second] = await Promise.all([run(), run()]);
    const wins = [...JSON.parse(first.stdout), ...JSON.parse(second.stdout)].sort();
    expect(wins).toEqual([...ids].sort());
  });

  it('removes the files of expired records', async () => {
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory, ttlMs: 200 });
    await store.set('old', { meta: '{}', state: '"x".repeat(1000)' }, null);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await store.get('old')).toBeUndefined();
    // The next write sweeps the folder.
    await store.set('new', { meta: '{}', state: '1' }, null);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await readdir(directory)).filter((name) => name.startsWith('old'))).toEqual([]);
  });
});

describe('file interaction store errors', () => {
  it('say what failed without naming the folder or any path', async () => {
    const directory = await freshFolder();
    await writeFile(path.join(directory, 'blocked'), 'a file where the store wants a folder');
    const store = createFileInteractionStore({ directory: path.join(directory, 'blocked', 'interactions') });
    const failure = (await store.set('run-1', { meta: '{}', state: '1' }, null).catch((error: unknown) => error)) as Error;
    expect(failure).toMatchObject({ code: 'STORE_ERROR', message: 'Could not save interaction run-1 (ENOTDIR)' });
    expect(failure.message).not.toContain(directory);

    const readable = createFileInteractionStore({ directory });
    await writeFile(path.join(directory, 'broken.meta'), '{not json');
    const broken = (await readable.get('broken').catch((error: unknown) => error)) as Error;
    expect(broken).toMatchObject({ code: 'STORE_ERROR', message: 'Interaction broken has a damaged record' });
  });
});
