import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { describeInteractionStoreConformance } from '@org/core/testing';
import { createFileInteractionStore } from './file-interaction-store.js';
import { expectOneClaimantPerRecord } from './test-support/shared-store-cases.js';

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
  it('takes over at once the lock of a process that died while holding it', async () => {
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory });
    await store.set('run-1', { meta: '{}', state: '{"a":1}' }, null);
    // The lock a process (long gone: no such pid) left behind when it died mid-write.
    await writeFile(path.join(directory, 'run-1.lock'), `${os.hostname()}\n2147483646\n${'0'.repeat(36)}\n`);
    const record = await store.get('run-1');
    const version = await store.set('run-1', { meta: '{}', state: '{"a":2}' }, record?.version ?? null);
    expect(version).toBeTypeOf('string');
    expect((await store.get('run-1'))?.state).toBe('{"a":2}');
    expect((await readdir(directory)).filter((name) => name.endsWith('.lock'))).toEqual([]);
  });

  it('refuses ids that could escape the folder, naming the id and not the folder', async () => {
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory });
    const error = await store.set('../evil', { meta: '{}', state: '1' }, null).catch((caught: unknown) => caught as Error);
    expect(error).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('Interaction id "../evil"') });
    expect((error as Error).message).not.toContain(directory);
  });

  it('lets exactly one of two processes claim each interaction', async () => {
    const directory = await freshFolder();
    await expectOneClaimantPerRecord({
      entry: dist,
      factory: 'createFileInteractionStore',
      storeOptions: { directory },
      openStore: () => createFileInteractionStore({ directory }),
    });
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

describe('file interaction store with records edited by hand', () => {
  it('never reads or deletes a file outside its folder that a meta file names', async () => {
    const outside = await freshFolder();
    const victim = path.join(outside, 'victim.txt');
    await writeFile(victim, 'not the store’s');
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory });
    const version = (await store.set('a', { meta: '{}', state: '"mine"' }, null)) as string;
    const meta = JSON.parse(await readFile(path.join(directory, 'a.meta'), 'utf8')) as Record<string, unknown>;
    await writeFile(path.join(directory, 'a.meta'), JSON.stringify({ ...meta, stateFile: path.relative(directory, victim) }));

    await expect(store.get('a')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Interaction a has a damaged record' });
    await expect(store.set('a', { meta: '{}', state: '"new"' }, version)).resolves.toBeUndefined();
    await expect(store.delete('a')).rejects.toMatchObject({ code: 'STORE_ERROR' });
    expect(await readFile(victim, 'utf8')).toBe('not the store’s');
  });

  it('reports meta files without their fields as damaged, with a coded error that names no path', async () => {
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory });
    const written = { meta: '{}', version: 'v-1', writtenAt: Date.now(), stateFile: '' };
    const damaged = ['null', '[]', '{}', '"text"', JSON.stringify(written), JSON.stringify({ ...written, stateFile: 'b.v-1.state', writtenAt: 'now' })];
    for (const text of damaged) {
      await writeFile(path.join(directory, 'b.meta'), text);
      const error = (await store.get('b').catch((caught: unknown) => caught)) as Error;
      expect(error, text).toMatchObject({ code: 'STORE_ERROR', message: 'Interaction b has a damaged record' });
      // A write finds no record it could update, and a new one replaces the damaged one.
      expect(await store.set('b', { meta: '{}' }, 'v-1'), text).toBeUndefined();
    }
    expect(await store.set('b', { meta: '{}', state: '"fresh"' }, null)).toEqual(expect.any(String));
    expect((await store.get('b'))?.state).toBe('"fresh"');
  });

  it('keeps ids of up to 200 characters, the longest it accepts', async () => {
    const store = createFileInteractionStore({ directory: await freshFolder() });
    const id = 'x'.repeat(200);
    const version = (await store.set(id, { meta: '{}', state: '1' }, null)) as string;
    expect(await store.set(id, { meta: '{}', state: '2' }, version)).toEqual(expect.any(String));
    expect((await store.get(id))?.state).toBe('2');
  });
});
