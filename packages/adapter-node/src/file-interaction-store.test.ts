import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { AgentError } from '@org/core';
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

describeInteractionStoreConformance('file', async () => createFileInteractionStore({ directory: await freshFolder() }), { describe, it, expect });

describe('file interaction store', () => {
  it('refuses ids that could escape the folder, naming the id', async () => {
    const store = createFileInteractionStore({ directory: await freshFolder() });
    await expect(store.save('../evil', {})).rejects.toThrow(/Interaction id "\.\.\/evil"/);
  });

  it('hands each interaction to exactly one of two processes racing for it', async () => {
    const directory = await freshFolder();
    const store = createFileInteractionStore({ directory });
    const ids = Array.from({ length: 20 }, (_, index) => `race-${index}`);
    for (const id of ids) await store.save(id, { id });
    const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/index.js');
    const script = `
      const { createFileInteractionStore } = await import(${JSON.stringify(dist)});
      const store = createFileInteractionStore({ directory: ${JSON.stringify(directory)} });
      const ids = ${JSON.stringify(ids)};
      const won = [];
      await Promise.all(ids.map(async (id) => { if ((await store.take(id)) !== undefined) won.push(id); }));
      console.log(JSON.stringify(won));`;
    const run = () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    const [first, second] = await Promise.all([run(), run()]);
    const wins = [...JSON.parse(first.stdout), ...JSON.parse(second.stdout)].sort();
    expect(wins).toEqual([...ids].sort());
  });
});

describe('file interaction store errors', () => {
  it('say what failed without naming the folder or any path', async () => {
    const directory = await freshFolder();
    await writeFile(path.join(directory, 'blocked'), 'a file where the store wants a folder');
    const store = createFileInteractionStore({ directory: path.join(directory, 'blocked', 'interactions') });
    const failure = (await store.save('run-1', { a: 1 }).then(
      () => undefined,
      (error: unknown) => error,
    )) as AgentError;
    expect(failure).toMatchObject({ code: 'STORE_ERROR' });
    expect(failure.message).toBe('Could not save interaction run-1 in the file store: ENOTDIR (not a directory)');
    expect(failure.message).not.toContain(directory);

    const readable = createFileInteractionStore({ directory });
    await writeFile(path.join(directory, 'broken.json'), '{not json');
    const broken = (await readable.take('broken').then(
      () => undefined,
      (error: unknown) => error,
    )) as AgentError;
    expect(broken.message).toBe('Could not read interaction broken in the file store: the stored file is not valid JSON');
  });
});
