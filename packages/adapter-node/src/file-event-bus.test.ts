import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { EventBus } from '@org/core';
import { describeEventBusConformance } from '@org/core/testing';
import { createFileEventBus, type FileEventBus } from './file-event-bus.js';

const folders: string[] = [];
async function freshFolder(): Promise<string> {
  const folder = await mkdtemp(path.join(os.tmpdir(), 'org-file-bus-'));
  folders.push(folder);
  return folder;
}
const buses: FileEventBus[] = [];
function busOn(directory: string, options: { idleMs?: number; pollMs?: number } = {}): FileEventBus {
  const bus = createFileEventBus({ directory, ...options });
  buses.push(bus);
  return bus;
}
afterAll(async () => {
  await Promise.all(buses.map((bus) => bus.close()));
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition()) && Date.now() < deadline) await sleep(10);
}
const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/index.js');
const channelFiles = async (directory: string) => (await readdir(directory)).filter((name) => name.endsWith('.channel'));

// Each connection of the suite is a bus of its own on one shared folder, as two processes would be.
let conformanceFolder: string | undefined;
describeEventBusConformance(
  'file',
  async () => {
    conformanceFolder ??= await freshFolder();
    return createFileEventBus({ directory: conformanceFolder });
  },
  { describe, it, expect },
  { cleanup: (instances) => Promise.all(instances.map((bus) => (bus as FileEventBus).close())).then(() => undefined) },
);

describe('file event bus', () => {
  for (const watching of [true, false]) {
    it(`carries messages between two processes ${watching ? 'woken by file notifications' : 'by polling alone, where notifications fail'}, and lets a process end once its subscription is closed`, async () => {
      const directory = await freshFolder();
      const bus = busOn(directory);
      const pongs: string[] = [];
      let wake: (() => void) | undefined;
      const listening = await bus.subscribe('pong', (message) => {
        pongs.push(message);
        wake?.();
      });
      // The child answers each ping with a pong and closes its subscription after the last; it must
      // then end by itself: nothing of the bus may hold its event loop open.
      const script = `
        if (${!watching}) {
          // A file system whose change notifications cannot be had.
          const fs = await import('node:fs');
          fs.default.watch = () => { throw Object.assign(new Error('watch is not available here'), { code: 'ENOSYS' }); };
          (await import('node:module')).syncBuiltinESMExports();
        }
        const { createFileEventBus } = await import(${JSON.stringify(dist)});
        const bus = createFileEventBus({ directory: ${JSON.stringify(directory)} });
        let seen = 0;
        const subscription = await bus.subscribe('ping', async (message) => {
          await bus.publish('pong', 'pong:' + message);
          seen += 1;
          if (seen === 20) await subscription.close();
        });
        console.log('ready');`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));

      const roundTrips: number[] = [];
      for (let ping = 0; ping < 20; ping += 1) {
        const answered = new Promise<void>((resolve) => {
          wake = resolve;
        });
        const sent = performance.now();
        await bus.publish('ping', String(ping));
        await answered;
        roundTrips.push(performance.now() - sent);
      }
      expect(pongs).toEqual(Array.from({ length: 20 }, (_, ping) => `pong:${ping}`));
      expect(await exited).toBe(0);
      clearTimeout(killer);
      await listening.close();
      const median = [...roundTrips].sort((a, b) => a - b)[10] as number;
      console.log(
        `file event bus, round trip between two processes (${watching ? 'notifications' : 'the child polls every 50 ms'}): median ${median.toFixed(2)} ms, first ${(roundTrips[0] as number).toFixed(2)} ms`,
      );
    }, 30_000);
  }

  it('reads each channel with one watcher and one open file, however many subscribe to it', async () => {
    const directory = await freshFolder();
    const bus = busOn(directory);
    const other = busOn(directory);
    const openFiles = () => readdirSync('/proc/self/fd').length;
    // The first watch of a process opens its one notification descriptor for good.
    await (await bus.subscribe('warm-up', () => undefined)).close();
    const before = openFiles();
    const heard = Array.from({ length: 50 }, () => [] as string[]);
    const subscriptions = await Promise.all(heard.map((messages) => bus.subscribe('crowded', (message) => messages.push(message))));
    expect(openFiles() - before).toBeLessThanOrEqual(2);
    await other.publish('crowded', 'to all');
    await until(() => heard.every((messages) => messages.length === 1));
    expect(heard.every((messages) => messages.join() === 'to all')).toBe(true);
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    expect(openFiles()).toBeLessThanOrEqual(before);
  });

  it('gives a late subscriber only what is published after it subscribed', async () => {
    const directory = await freshFolder();
    const [bus, other] = [busOn(directory), busOn(directory)];
    const early: string[] = [];
    const late: string[] = [];
    await bus.subscribe('news', (message) => early.push(message));
    await other.publish('news', 'first');
    await other.publish('news', 'second');
    await bus.subscribe('news', (message) => late.push(message));
    await other.publish('news', 'third');
    await until(() => early.length === 3 && late.length === 1);
    expect(early).toEqual(['first', 'second', 'third']);
    expect(late).toEqual(['third']);
  });

  it('writes nothing for a channel nobody listens to, and removes channels nobody uses any more', async () => {
    const directory = await freshFolder();
    const bus = busOn(directory, { idleMs: 300 });
    const other = busOn(directory, { idleMs: 300 });
    await bus.publish('nobody', 'hello?');
    expect(await channelFiles(directory)).toEqual([]);

    const left = await bus.subscribe('left', () => undefined);
    const heard: string[] = [];
    await bus.subscribe('kept', (message) => heard.push(message));
    expect((await channelFiles(directory)).length).toBe(2);
    await left.close();
    // Quiet for three times the idle time: only the channel someone still listens on stays.
    for (let round = 0; round < 9; round += 1) {
      await sleep(110);
      await other.publish('nobody', 'sweep now');
    }
    await until(async () => (await channelFiles(directory)).length === 1);
    expect((await channelFiles(directory)).length).toBe(1);
    await other.publish('kept', 'still here');
    await until(() => heard.length === 1);
    expect(heard).toEqual(['still here']);
  });

  it('listens again when its channel file is removed under it', async () => {
    const directory = await freshFolder();
    const bus = busOn(directory, { pollMs: 20 });
    const other = busOn(directory);
    const heard: string[] = [];
    await bus.subscribe('fragile', (message) => heard.push(message));
    const [file] = await channelFiles(directory);
    await unlink(path.join(directory, file as string));
    await until(async () => (await channelFiles(directory)).length === 1);
    await other.publish('fragile', 'after');
    await until(() => heard.length === 1);
    expect(heard).toEqual(['after']);
  });

  it('refuses bad channels and oversized messages with coded errors, and everything once closed', async () => {
    const directory = await freshFolder();
    const bus = createFileEventBus({ directory });
    await expect(bus.publish('', 'x')).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(bus.subscribe('c'.repeat(2_000), () => undefined)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(bus.publish('big', 'x'.repeat(70_000))).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    // Any channel name is safe: names are hashed into file names.
    const heard: string[] = [];
    const odd = '../../etc/passwd\u0000:*?';
    await bus.subscribe(odd, (message) => heard.push(message));
    await bus.publish(odd, 'fine');
    await until(() => heard.length === 1);
    expect(heard).toEqual(['fine']);
    expect((await readdir(directory)).every((name) => /^[0-9a-f]{40}\.channel$/.test(name))).toBe(true);
    await bus.close();

    await writeFile(path.join(directory, 'blocked'), 'a file where the bus wants a folder');
    const blocked = createFileEventBus({ directory: path.join(directory, 'blocked', 'bus') });
    const failure = await blocked.subscribe('session:s-1', () => undefined).then(
      () => undefined,
      (caught: unknown) => caught as Error,
    );
    expect(failure).toMatchObject({ code: 'STORE_ERROR', message: expect.stringContaining('channel "session:s-1"') });
    expect(failure?.message).not.toContain(directory);
    await blocked.close();

    const error = await bus.subscribe('after', () => undefined).then(
      () => undefined,
      (caught: unknown) => caught as Error,
    );
    expect(error).toMatchObject({ code: 'STORE_ERROR' });
    expect(error?.message).not.toContain(directory);
  });

  it('measures delivery between two buses (figures only, no assertion on speed)', async () => {
    const directory = await freshFolder();
    const publisher: EventBus = busOn(directory);
    const subscriber: EventBus = busOn(directory);
    let received = 0;
    let wake: (() => void) | undefined;
    await subscriber.subscribe('timed', () => {
      received += 1;
      wake?.();
    });
    const latencies: number[] = [];
    for (let round = 0; round < 200; round += 1) {
      const arrived = new Promise<void>((resolve) => {
        wake = resolve;
      });
      const sent = performance.now();
      await publisher.publish('timed', `e:${round}`);
      await arrived;
      latencies.push(performance.now() - sent);
    }
    latencies.sort((a, b) => a - b);
    const at = (share: number) => (latencies[Math.floor(share * (latencies.length - 1))] as number).toFixed(2);
    console.log(`file event bus, publish to delivery on another bus: median ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${at(1)} ms`);
    expect(received).toBe(200);
  }, 30_000);
});
