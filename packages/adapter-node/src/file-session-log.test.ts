import { execFile, spawn } from 'node:child_process';
import { appendFile, mkdtemp, open, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { describeSessionLogConformance } from '@org/core/testing';
import { createFileSessionLog } from './file-session-log.js';

const folders: string[] = [];
async function freshFolder(): Promise<string> {
  const folder = await mkdtemp(path.join(os.tmpdir(), 'org-file-log-'));
  folders.push(folder);
  return folder;
}
afterAll(async () => {
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/index.js');
const errorOf = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as Error & { code?: string });

describeSessionLogConformance('file', async (options) => createFileSessionLog({ directory: await freshFolder(), ...options }), { describe, it, expect });

describe('file session log', () => {
  it('refuses ids that could escape the folder, naming the id and not the folder', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    for (const id of ['../evil', 'a/b', 'a\\b', '', '.', '..', 'x'.repeat(201), 'nul\u0000byte']) {
      const attempts: Array<() => Promise<unknown>> = [
        () => log.create(id, { interactionId: 'i' }),
        () => log.get(id),
        () => log.append(id, ['{}']),
        () => log.read(id, -1, 10),
        () => log.update(id, { status: 'failed' }),
      ];
      for (const attempt of attempts) {
        const error = await errorOf(Promise.resolve().then(attempt));
        expect(error).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('Session id') });
        expect(error?.message).not.toContain(directory);
      }
    }
    expect(await readdir(directory)).toEqual([]);
  });

  it('names the session and never the folder when the file system fails', async () => {
    const directory = await freshFolder();
    await writeFile(path.join(directory, 'blocked'), 'a file where the log wants a folder');
    const log = createFileSessionLog({ directory: path.join(directory, 'blocked', 'sessions') });
    const error = await errorOf(log.create('s-1', { interactionId: 'i-1' }));
    expect(error).toMatchObject({ code: 'STORE_ERROR', message: expect.stringContaining('session s-1') });
    expect(error?.message).not.toContain(directory);
    expect(error?.message).not.toContain('blocked');
  });

  it('lets two processes append to one session at once: dense indexes, each event at the index its writer got', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('shared', { interactionId: 'shared' });
    // Each process appends 150 single events and 25 pairs, four at a time, and prints what it got.
    const script = (writer: string) => `
      const { createFileSessionLog } = await import(${JSON.stringify(dist)});
      const log = createFileSessionLog({ directory: ${JSON.stringify(directory)} });
      const jobs = Array.from({ length: 175 }, (_, n) => n < 150
        ? [JSON.stringify({ writer: '${writer}', n })]
        : [JSON.stringify({ writer: '${writer}', n, part: 0 }), JSON.stringify({ writer: '${writer}', n, part: 1 })]);
      const got = [];
      const started = performance.now();
      await Promise.all(Array.from({ length: 4 }, async () => {
        for (let job = jobs.shift(); job; job = jobs.shift()) got.push([await log.append('shared', job), job]);
      }));
      console.log(JSON.stringify({ got, ms: performance.now() - started }));`;
    const run = (writer: string) => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script(writer)]);
    const outputs = await Promise.all([run('a'), run('b')]);
    const results = outputs.map(({ stdout }) => JSON.parse(stdout) as { got: Array<[number, string[]]>; ms: number });
    const events = await log.read('shared', -1, 10_000);
    expect(events.length).toBe(2 * (150 + 2 * 25));
    expect((await log.get('shared'))?.eventCount).toBe(events.length);
    const claimed = new Set<number>();
    for (const { got } of results) {
      for (const [first, batch] of got) {
        batch.forEach((event, offset) => {
          expect(events[first + offset]).toBe(event);
          claimed.add(first + offset);
        });
      }
    }
    expect(claimed.size).toBe(events.length);
    console.log(
      `file session log, two processes appending at once: ${results.map(({ ms }) => `${((ms / 175) * 1000).toFixed(0)} µs`).join(' and ')} per append (wall time / appends)`,
    );
  }, 60_000);

  it('keeps every acknowledged event of processes killed while appending, and goes on after them', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('crash', { interactionId: 'crash' });
    const folder = path.join(directory, 'crash.session');
    // Each append is a pair: an 8 MB text (long enough to write that a kill often lands in the
    // middle) and a small one. Pair n sits at indexes 2n and 2n + 1. A child stops by itself
    // after 32 pairs, or as soon as this process is gone (its stdin closes), so one left behind
    // by an interrupted test run cannot fill the disk.
    const script = `
      process.stdin.on('end', () => process.exit(0)).resume();
      const { createFileSessionLog } = await import(${JSON.stringify(dist)});
      const log = createFileSessionLog({ directory: ${JSON.stringify(directory)} });
      const pad = 'x'.repeat(8_000_000);
      const start = (await log.get('crash')).eventCount / 2;
      for (let n = start; n < start + 32; n += 1) {
        const first = await log.append('crash', ['{"n":' + n + ',"pad":"' + pad + '"}', JSON.stringify({ n, second: true })]);
        process.stdout.write(first + '\\n');
      }`;
    const leftovers: string[] = [];
    let acknowledgedPairs = 0;
    for (let round = 0; round < 4; round += 1) {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      let acknowledged = 0;
      await new Promise<void>((resolve) => {
        child.stdout.on('data', (chunk: Buffer) => {
          acknowledged += chunk.toString().split('\n').length - 1;
          if (acknowledged >= 2 && !child.killed) {
            // Killed at a varying point of the next append.
            setTimeout(() => child.kill('SIGKILL'), Math.random() * 150);
            resolve();
          }
        });
      });
      await exited;
      const sizes = { events: (await stat(path.join(folder, 'events'))).size, index: (await stat(path.join(folder, 'index'))).size };

      const count = (await log.get('crash'))?.eventCount ?? 0;
      // Appends are whole or absent, and none that was acknowledged is missing.
      expect(count % 2).toBe(0);
      expect(count / 2).toBeGreaterThanOrEqual(acknowledgedPairs + acknowledged);
      acknowledgedPairs = count / 2;
      const events = await log.read('crash', -1, 1_000);
      expect(events.length).toBe(count);
      events.forEach((event, index) => {
        const parsed = JSON.parse(event) as { n: number; pad?: string; second?: boolean };
        expect(parsed.n).toBe(Math.floor(index / 2));
        if (index % 2 === 0) expect(parsed.pad?.length).toBe(8_000_000);
        else expect(parsed.second).toBe(true);
      });
      const kept = events.reduce((total, event) => total + Buffer.byteLength(event), 0);
      leftovers.push(`${sizes.events - kept} B of texts + ${sizes.index - count * 16} B of index`);
    }
    console.log(`file session log, left past the last complete append by each of 4 processes killed while appending: ${leftovers.join('; ')}`);
    const count = (await log.get('crash'))?.eventCount ?? 0;
    expect(await log.append('crash', ['{"after":"crash"}'])).toBe(count);
    expect(await log.read('crash', count - 1, 10)).toEqual(['{"after":"crash"}']);
  }, 60_000);

  it('ignores what an append cut short left behind, and overwrites it', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('torn', { interactionId: 'torn' });
    await log.append('torn', ['{"a":0}', '{"a":1}']);
    await log.append('torn', ['{"a":2}']);
    const folder = path.join(directory, 'torn.session');

    // Cut short after its texts: bytes past the end of the events, no index entries.
    await appendFile(path.join(folder, 'events'), 'x'.repeat(5_000));
    expect(await log.read('torn', -1, 10)).toEqual(['{"a":0}', '{"a":1}', '{"a":2}']);
    expect(await log.append('torn', ['{"a":3}'])).toBe(3);

    // Cut short inside its index entries: a three-event append whose last entry never landed.
    expect(await log.append('torn', ['{"b":0}', '{"b":1}', '{"b":2}'])).toBe(4);
    const index = path.join(folder, 'index');
    await truncate(index, (await stat(index)).size - 16);
    await appendFile(index, Buffer.from([1, 2, 3, 4, 5, 6, 7]));
    expect((await log.get('torn'))?.eventCount).toBe(4);
    expect(await log.read('torn', 2, 10)).toEqual(['{"a":3}']);
    expect(await log.append('torn', ['{"c":0}'])).toBe(4);
    expect(await log.read('torn', -1, 10)).toEqual(['{"a":0}', '{"a":1}', '{"a":2}', '{"a":3}', '{"c":0}']);
  });

  it('reports a damaged event as a store error naming the session and the event', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('bitrot', { interactionId: 'bitrot' });
    await log.append('bitrot', ['{"a":"first"}', '{"a":"second"}', '{"a":"third"}']);
    const handle = await open(path.join(directory, 'bitrot.session', 'events'), 'r+');
    await handle.write('X', 16);
    await handle.close();
    expect(await log.read('bitrot', -1, 1)).toEqual(['{"a":"first"}']);
    const error = await errorOf(log.read('bitrot', 0, 10));
    expect(error).toMatchObject({ code: 'STORE_ERROR', message: 'Session bitrot has a damaged event log at event 1' });
  });

  it('reports a status file edited into something else as a damaged record, never as a session', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('edited', { interactionId: 'i-1' });
    for (const text of ['null', '[]', '{}', '{"status":"bogus"}', '{"status":5}', '{"status":"running","interactionId":7}', '{"status":"running","owner":{}}']) {
      await writeFile(path.join(directory, 'edited.session', 'info.json'), text);
      expect(await errorOf(log.get('edited')), text).toMatchObject({ code: 'STORE_ERROR', message: 'Session edited has a damaged record' });
      expect(await errorOf(log.update('edited', { status: 'failed' })), text).toMatchObject({ code: 'STORE_ERROR' });
    }
  });

  it('takes over at once the lock of a process that died, and waits for a live holder', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('locked', { interactionId: 'locked' });
    const lock = path.join(directory, 'locked.session', 'lock');

    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => gone.once('exit', resolve));
    const pid = gone.pid as number;
    await writeFile(lock, `${os.hostname()}\n${pid}\nleft-behind\n`);
    expect(await log.append('locked', ['{"n":0}'])).toBe(0);

    await writeFile(lock, `${os.hostname()}\n${process.pid}\nheld\n`);
    let done = false;
    const waiting = log.append('locked', ['{"n":1}']).then((index) => {
      done = true;
      return index;
    });
    await sleep(200);
    expect(done).toBe(false);
    await rm(lock);
    expect(await waiting).toBe(1);
  });

  it('removes the folders of expired sessions on a later write', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory, ttlMs: 300 });
    await log.create('old', { interactionId: 'old' });
    await log.append('old', ['{"n":0}']);
    // Sweeps run at most once a second.
    await sleep(1_100);
    expect(await log.get('old')).toBeUndefined();
    await log.create('new', { interactionId: 'new' });
    for (let attempt = 0; attempt < 50 && (await readdir(directory)).includes('old.session'); attempt += 1) await sleep(20);
    expect(await readdir(directory)).toEqual(['new.session']);
    expect(await log.get('new')).toMatchObject({ status: 'running', eventCount: 0 });
  });

  it('keeps the status in a small file and the events byte for byte', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('s-1', { interactionId: 'i-1', owner: 'alice' });
    await log.update('s-1', { status: 'suspended', interactionId: 'i-2' }, ['running']);
    expect(JSON.parse(await readFile(path.join(directory, 's-1.session', 'info.json'), 'utf8'))).toEqual({
      status: 'suspended',
      interactionId: 'i-2',
      owner: 'alice',
    });
    const texts = ['{"t":"a\\nb"}', '{"t":"😀"}', '{ "spaced" : true }\n'];
    await log.append('s-1', texts);
    expect(await readFile(path.join(directory, 's-1.session', 'events'), 'utf8')).toBe(texts.join(''));
    expect(await log.read('s-1', -1, 10)).toEqual(texts);
  });

  it('measures appends and reads (figures only, no assertion on speed)', async () => {
    const directory = await freshFolder();
    const log = createFileSessionLog({ directory });
    await log.create('timed', { interactionId: 'timed' });
    const event = JSON.stringify({ functionCallUpdate: { callId: 'c-1', status: 'running', text: 'x'.repeat(250) } });
    // Warmed up first, so the figures are of optimised code.
    for (let n = 0; n < 300; n += 1) await log.append('timed', [event]);
    const appends = 500;
    let started = performance.now();
    for (let n = 0; n < appends; n += 1) await log.append('timed', [event]);
    const appendMs = (performance.now() - started) / appends;
    started = performance.now();
    for (let n = 0; n < appends; n += 1) await log.read('timed', n, 1);
    const readMs = (performance.now() - started) / appends;
    started = performance.now();
    for (let n = 0; n < appends; n += 1) await log.get('timed');
    const getMs = (performance.now() - started) / appends;
    console.log(
      `file session log, one process: append ${(appendMs * 1000).toFixed(0)} µs, read of one event after a cursor ${(readMs * 1000).toFixed(0)} µs, get ${(getMs * 1000).toFixed(0)} µs`,
    );
    expect((await log.get('timed'))?.eventCount).toBe(appends + 300);
  }, 60_000);
});
