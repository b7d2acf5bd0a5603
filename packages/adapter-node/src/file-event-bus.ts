import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, futimesSync, mkdirSync, openSync, readSync, watch, writeSync, type FSWatcher } from 'node:fs';
import { readdir, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { AgentError, type EventBus, type EventSubscription } from '@org/core';
import { acquireFileLock, codeOf } from './file-lock.js';
import { storeFailure } from './store-failure.js';

/** Options of {@link createFileEventBus}. */
export interface FileEventBusOptions {
  /** Folder for the channel files; created when missing. Every process of the deployment uses the same one. */
  directory: string;
  /** How often each channel file is checked besides the file system's change notifications. Default 50 ms. */
  pollMs?: number;
  /** A channel file nobody published to or listened on for this long is removed. Default 60 s. */
  idleMs?: number;
}

/** An `EventBus` on files in a shared folder, with `close()` for its watchers. */
export interface FileEventBus extends EventBus {
  /** Ends every subscription of this bus; later calls fail. */
  close(): Promise<void>;
}

/** The largest message, in UTF-8 bytes of its JSON form: the bus carries wake-ups, not data. */
const MAX_MESSAGE_BYTES = 64 * 1024;
const MAX_CHANNEL_LENGTH = 1_024;
/** The most read from a channel file at once. */
const READ_CHUNK_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;
const EMPTY = Buffer.alloc(0);

interface Subscriber {
  listener: (message: string) => void;
  /** Messages that start before this offset of the current file were published before it subscribed. */
  from: number;
  active: boolean;
}

/** One channel this bus listens on: its file, read by one watcher for all its subscribers. */
interface Channel {
  name: string;
  file: string;
  lock: string;
  subscribers: Set<Subscriber>;
  /** The open channel file. */
  descriptor?: number;
  /** Bumped each time the file is replaced by a new one. */
  generation: number;
  /** How far the file has been read and delivered. */
  offset: number;
  /** The start of a message whose end has not been read yet. */
  rest: Buffer;
  watcher?: FSWatcher;
  opened: Promise<void>;
  reading?: Promise<void>;
  readAgain: boolean;
  closed: boolean;
}

/**
 * An `EventBus` for several Node processes of one machine sharing a folder, with neither Redis nor
 * PostgreSQL. Each channel is a file (`<hash of the name>.channel`) to which `publish` appends
 * one line per message (`O_APPEND`, so messages of several processes never interleave);
 * publishing to a channel nobody listens to writes nothing. Each bus reads a channel it listens
 * on with one watcher shared by its subscribers: `fs.watch` wakes it at once, and a check every
 * `pollMs` covers file systems whose notifications do not arrive. `subscribe` resolves once it
 * knows where the file ends, so it sees every message published after.
 *
 * Listening processes touch their channel files every `idleMs / 3`; a file nobody published to
 * or listened on for `idleMs` is removed by the next bus that publishes or subscribes. Watchers
 * and timers never keep the process alive.
 *
 * @example
 * ```ts
 * const bus = createFileEventBus({ directory: '.data/bus' });
 * const subscription = await bus.subscribe('session:s-1', (message) => console.log(message));
 * await bus.publish('session:s-1', 'end'); // logs "end", in this process or any other
 * await subscription.close();
 * ```
 */
export function createFileEventBus(options: FileEventBusOptions): FileEventBus {
  const directory = path.resolve(options.directory);
  const pollMs = checkInterval(options.pollMs ?? 50, 'pollMs');
  const idleMs = checkInterval(options.idleMs ?? 60_000, 'idleMs');
  const channels = new Map<string, Channel>();
  let poller: NodeJS.Timeout | undefined;
  let toucher: NodeJS.Timeout | undefined;
  let closed = false;
  let lastSweep = Date.now();
  let sweeping = false;

  const baseOf = (name: string) => path.join(directory, createHash('sha256').update(name).digest('hex').slice(0, 40));

  const checkChannel = (name: string, action: string): void => {
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_CHANNEL_LENGTH) {
      throw new AgentError('BAD_REQUEST', `Channel name must be 1 to ${MAX_CHANNEL_LENGTH} characters`);
    }
    if (closed) throw new AgentError('STORE_ERROR', `Could not ${action} ${shown(name)}: the bus is closed`);
  };

  /** Opens (or creates) the channel's file and claims it as listened to, holding its lock so no sweep removes it meanwhile. */
  const openFile = async (channel: Channel): Promise<{ descriptor: number; size: number }> => {
    mkdirSync(directory, { recursive: true });
    const lock = await acquireFileLock(channel.lock);
    let descriptor: number | undefined;
    try {
      descriptor = openSync(channel.file, 'a+');
      const now = new Date();
      futimesSync(descriptor, now, now);
      return { descriptor, size: fstatSync(descriptor).size };
    } catch (error) {
      if (descriptor !== undefined) closeQuietly(descriptor);
      throw error;
    } finally {
      lock.release();
    }
  };

  const watchFile = (channel: Channel): void => {
    channel.watcher?.close();
    channel.watcher = undefined;
    try {
      const watcher = watch(channel.file, { persistent: false }, () => void readNew(channel));
      // Notifications are only a shortcut: the poll goes on without them.
      watcher.on('error', () => {
        watcher.close();
        if (channel.watcher === watcher) channel.watcher = undefined;
      });
      channel.watcher = watcher;
    } catch {
      // Some file systems cannot be watched; the poll covers them.
    }
  };

  /** After the file was removed under us (a sweep after a long stall): listen on a new one. */
  const replaceFile = async (channel: Channel): Promise<void> => {
    const { descriptor } = await openFile(channel);
    if (channel.closed) {
      closeQuietly(descriptor);
      return;
    }
    const previous = channel.descriptor;
    channel.descriptor = descriptor;
    channel.generation += 1;
    // Everything in the new file was published after the old one went.
    channel.offset = 0;
    channel.rest = EMPTY;
    for (const subscriber of channel.subscribers) subscriber.from = 0;
    watchFile(channel);
    if (previous !== undefined) closeQuietly(previous);
  };

  /** Reads what was appended since the last read and delivers it; one read at a time per channel. */
  const readNew = (channel: Channel): Promise<void> => {
    if (channel.reading) {
      channel.readAgain = true;
      return channel.reading;
    }
    let finished!: () => void;
    channel.reading = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const reading = channel.reading;
    void (async () => {
      try {
        do {
          channel.readAgain = false;
          const descriptor = channel.descriptor;
          if (descriptor === undefined || channel.closed) return;
          const info = fstatSync(descriptor);
          if (info.size < channel.offset) {
            // Cut short by someone else: go on from its new end.
            channel.offset = info.size;
            channel.rest = EMPTY;
          }
          while (channel.offset < info.size) {
            const length = Math.min(info.size - channel.offset, READ_CHUNK_BYTES);
            const buffer = Buffer.allocUnsafe(length);
            const bytesRead = readSync(descriptor, buffer, 0, length, channel.offset);
            if (bytesRead === 0) break;
            deliver(channel, buffer.subarray(0, bytesRead));
          }
          if (info.nlink === 0 && !channel.closed) {
            await replaceFile(channel);
            channel.readAgain = true;
          }
        } while (channel.readAgain && !channel.closed);
      } catch {
        // A file system hiccup: the next notification or poll tries again.
      } finally {
        // Cleared at once (not on a later microtask), so a wake-up right after starts a new read.
        channel.reading = undefined;
        finished();
      }
    })();
    return reading;
  };

  const deliver = (channel: Channel, chunk: Buffer): void => {
    const data = channel.rest.length > 0 ? Buffer.concat([channel.rest, chunk]) : chunk;
    const dataStart = channel.offset - channel.rest.length;
    let lineStart = 0;
    for (let newline = data.indexOf(NEWLINE); newline !== -1; newline = data.indexOf(NEWLINE, lineStart)) {
      const message = parseLine(data, lineStart, newline);
      const offset = dataStart + lineStart;
      lineStart = newline + 1;
      if (message === undefined) continue;
      for (const subscriber of channel.subscribers) {
        if (offset < subscriber.from) continue;
        queueMicrotask(() => {
          if (subscriber.active) subscriber.listener(message);
        });
      }
    }
    channel.offset += chunk.length;
    // Without a newline for this long it is not a message (the remains of a write cut short).
    const rest = data.length - lineStart;
    channel.rest = rest === 0 || rest > 2 * MAX_MESSAGE_BYTES ? EMPTY : Buffer.from(data.subarray(lineStart));
  };

  const startTimers = (): void => {
    // The poll keeps the process running while anything is subscribed, as a socket would.
    poller ??= setInterval(() => {
      for (const channel of channels.values()) void readNew(channel);
    }, pollMs);
    toucher ??= setInterval(() => {
      const now = new Date();
      for (const channel of channels.values()) {
        try {
          if (channel.descriptor !== undefined) futimesSync(channel.descriptor, now, now);
        } catch {
          // The next touch tries again.
        }
      }
    }, Math.max(1, Math.floor(idleMs / 3))).unref();
  };

  const stopTimersIfIdle = (): void => {
    if (channels.size > 0) return;
    clearInterval(poller);
    clearInterval(toucher);
    poller = undefined;
    toucher = undefined;
  };

  const closeChannel = async (channel: Channel): Promise<void> => {
    if (channel.closed) return;
    channel.closed = true;
    if (channels.get(channel.name) === channel) channels.delete(channel.name);
    stopTimersIfIdle();
    channel.watcher?.close();
    channel.watcher = undefined;
    await channel.opened.catch(() => undefined);
    const descriptor = channel.descriptor;
    channel.descriptor = undefined;
    if (descriptor !== undefined) closeQuietly(descriptor);
  };

  const channelFor = (name: string): Channel => {
    const existing = channels.get(name);
    if (existing) return existing;
    const base = baseOf(name);
    const channel: Channel = {
      name,
      file: `${base}.channel`,
      lock: `${base}.lock`,
      subscribers: new Set(),
      generation: 0,
      offset: 0,
      rest: EMPTY,
      opened: Promise.resolve(),
      readAgain: false,
      closed: false,
    };
    channel.opened = (async () => {
      const { descriptor, size } = await openFile(channel);
      if (channel.closed) {
        closeQuietly(descriptor);
        return;
      }
      channel.descriptor = descriptor;
      channel.offset = size;
      watchFile(channel);
    })();
    channels.set(name, channel);
    startTimers();
    return channel;
  };

  /** Removes channel files nobody has published to or listened on for `idleMs`. */
  const sweep = async (): Promise<void> => {
    if (sweeping || Date.now() - lastSweep < idleMs / 2) return;
    sweeping = true;
    lastSweep = Date.now();
    try {
      const names = await readdir(directory).catch(() => [] as string[]);
      for (const name of names) {
        if (!name.endsWith('.channel')) continue;
        const file = path.join(directory, name);
        const idle = async () => Date.now() - (await stat(file)).mtimeMs > idleMs;
        if (!(await idle().catch(() => false))) continue;
        // Under the channel's lock, so a subscriber opening it now either finds it gone or keeps it.
        const lock = await acquireFileLock(`${file.slice(0, -'.channel'.length)}.lock`).catch(() => undefined);
        if (!lock) continue;
        try {
          if (await idle().catch(() => false)) await unlink(file).catch(() => undefined);
        } finally {
          lock.release();
        }
      }
    } finally {
      sweeping = false;
    }
  };

  const afterUse = () => {
    void sweep().catch(() => undefined);
  };

  return {
    async subscribe(name, listener) {
      checkChannel(name, 'subscribe to');
      const channel = channelFor(name);
      // Joined at once, so the channel stays open while this subscription is being set up.
      const subscriber: Subscriber = { listener, from: Number.POSITIVE_INFINITY, active: true };
      channel.subscribers.add(subscriber);
      try {
        await channel.opened;
        for (;;) {
          const { descriptor, generation } = channel;
          if (descriptor === undefined) throw new Error('CLOSED');
          const info = fstatSync(descriptor);
          if (info.nlink === 0) {
            await readNew(channel);
            if (generation === channel.generation) throw Object.assign(new Error('The channel file is gone'), { code: 'ENOENT' });
            continue;
          }
          subscriber.from = info.size;
          break;
        }
      } catch (error) {
        subscriber.active = false;
        channel.subscribers.delete(subscriber);
        if (channel.subscribers.size === 0) await closeChannel(channel);
        throw storeFailure('file', `subscribe to ${shown(name)}`, error);
      }
      afterUse();
      const subscription: EventSubscription = {
        async close() {
          if (!subscriber.active) return;
          subscriber.active = false;
          channel.subscribers.delete(subscriber);
          if (channel.subscribers.size === 0) await closeChannel(channel);
        },
      };
      return subscription;
    },

    async publish(name, message) {
      checkChannel(name, 'publish to');
      if (typeof message !== 'string') throw new AgentError('BAD_REQUEST', `Message to ${shown(name)} must be a string`);
      const line = Buffer.from(`${JSON.stringify(message)}\n`, 'utf8');
      if (line.length > MAX_MESSAGE_BYTES) {
        throw new AgentError('PAYLOAD_TOO_LARGE', `Message to ${shown(name)} is over ${MAX_MESSAGE_BYTES} bytes`);
      }
      afterUse();
      let descriptor: number;
      try {
        // Never created here: no file means nobody listens.
        descriptor = openSync(`${baseOf(name)}.channel`, constants.O_WRONLY | constants.O_APPEND);
      } catch (error) {
        if (codeOf(error) === 'ENOENT') return;
        throw storeFailure('file', `publish to ${shown(name)}`, error);
      }
      try {
        // One write, so the line lands whole after every other process's lines.
        if (writeSync(descriptor, line, 0, line.length) < line.length) throw Object.assign(new Error('Short write'), { code: 'EIO' });
      } catch (error) {
        throw storeFailure('file', `publish to ${shown(name)}`, error);
      } finally {
        closeQuietly(descriptor);
      }
    },

    async close() {
      closed = true;
      const open = [...channels.values()];
      for (const channel of open) {
        for (const subscriber of channel.subscribers) subscriber.active = false;
        channel.subscribers.clear();
      }
      await Promise.all(open.map(closeChannel));
    },
  };
}

function closeQuietly(descriptor: number): void {
  try {
    closeSync(descriptor);
  } catch {
    // Already closed.
  }
}

function parseLine(data: Buffer, start: number, end: number): string | undefined {
  if (end === start) return undefined;
  try {
    const message: unknown = JSON.parse(data.toString('utf8', start, end));
    return typeof message === 'string' ? message : undefined;
  } catch {
    return undefined;
  }
}

function shown(channel: string): string {
  return `channel ${JSON.stringify(channel.length > 80 ? `${channel.slice(0, 80)}…` : channel)}`;
}

function checkInterval(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0) throw new TypeError(`createFileEventBus: \`${name}\` must be a positive number of milliseconds`);
  return value;
}
