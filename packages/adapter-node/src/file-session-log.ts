import { randomUUID } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { AgentError, type SessionInfo, type SessionLog, type SessionStatus } from '@org/core';
import { acquireFileLock, codeOf, type FileLock } from './file-lock.js';
import { checkStoredSession, checkTtl, storeFailure } from './store-failure.js';

/** Options of {@link createFileSessionLog}. */
export interface FileSessionLogOptions {
  /** Folder for the sessions; created when missing. Several processes of one machine may share it. */
  directory: string;
  /** Sessions not written for this long are gone. Default 7 days. */
  ttlMs?: number;
}

const SAFE_ID = /^[A-Za-z0-9._-]{1,200}$/;

// The index holds one 16-byte entry per event:
//   0..5   where the event's text ends in the events file (unsigned, little-endian)
//   6      flags: LAST_OF_APPEND on the last event of each append
//   7      ENTRY_MARK, so a run of zero bytes is never taken for an entry
//   8..11  CRC-32 of the event's UTF-8 bytes
//   12..15 CRC-32 of bytes 0..11
// An append counts once its last entry (the flagged one) is in the file; entries after the last
// flagged one are the remains of an append that died and are ignored, then overwritten.
const ENTRY_BYTES = 16;
const ENTRY_MARK = 0xe7;
const LAST_OF_APPEND = 1;
/** How many entries the search for the last complete append reads at a time. */
const TAIL_ENTRIES = 64;

const INFO = 'info.json';
const INDEX = 'index';
const EVENTS = 'events';
const LOCK = 'lock';

/** `info.json`: what the log knows of a session besides its events. */
interface StoredInfo {
  status: SessionStatus;
  interactionId?: string;
  owner?: string;
}

/** The part of the index that holds complete appends. */
interface Committed {
  /** How many events. */
  count: number;
  /** Where the last one ends in the events file. */
  end: number;
}

/**
 * A `SessionLog` in a folder that several Node processes of one machine share, for a deployment
 * without Redis or PostgreSQL. Each session is a folder `<id>.session` holding `info.json`
 * (status, interaction, owner; replaced by writing a temporary file and renaming it), `events`
 * (the events' UTF-8 texts, back to back) and `index` (16 bytes per event: where it ends, a
 * checksum, and a mark on the last event of each append). Reading after a cursor reads only the
 * index entries and bytes it returns.
 *
 * Appends, creates and status changes hold the session's lock file (created with `O_EXCL`;
 * taken over at once from a process of this machine that died, otherwise after 30 s), so indexes
 * are dense and ordered across processes; reads take no lock. An append writes the texts first
 * and its index entries after, so one cut short by a crash is never seen and is overwritten by
 * the next. Sessions not written for `ttlMs` (the index file's modification time) read as absent
 * and their folders are removed by a later write.
 *
 * Ids are 1 to 200 letters, digits, `.`, `_` and `-` (else `BAD_REQUEST`); errors name the
 * session, never the folder.
 *
 * @example
 * ```ts
 * const log = createFileSessionLog({ directory: '.data/sessions' });
 * await log.create('s-1', { interactionId: 's-1' });
 * await log.append('s-1', ['{"thought":{"text":"hm"}}']); // 0
 * ```
 */
export function createFileSessionLog(options: FileSessionLogOptions): SessionLog {
  const directory = path.resolve(options.directory);
  const ttlMs = checkTtl(options.ttlMs, 'createFileSessionLog');
  const sweepEveryMs = Math.min(Math.max(ttlMs / 10, 1_000), 600_000);
  let lastSweep = Date.now();
  let sweeping = false;
  /** The tail of each session's queue of writes in this process: one at a time asks for the lock. */
  const queues = new Map<string, Promise<unknown>>();

  const folderOf = (id: string) => path.join(directory, `${id}.session`);
  const fileOf = (id: string, name: string) => path.join(directory, `${id}.session`, name);
  const expired = (modifiedMs: number) => Date.now() - modifiedMs >= ttlMs;
  const checkId = (id: string): void => {
    if (typeof id !== 'string' || !SAFE_ID.test(id) || id === '.' || id === '..') {
      const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 80)) : typeof id;
      throw new AgentError('BAD_REQUEST', `Session id ${shown} may only hold 1 to 200 letters, digits, ".", "_" and "-"`);
    }
  };

  /** Runs `body` holding the session's lock, after this process's earlier writes to it. */
  const locked = <T>(id: string, body: (lock: FileLock) => T | Promise<T>): Promise<T> => {
    const previous = queues.get(id) ?? Promise.resolve();
    const next = previous.then(async () => {
      const lock = await acquireFileLock(fileOf(id, LOCK));
      try {
        return await body(lock);
      } finally {
        lock.release();
      }
    });
    const tail = next.catch(() => undefined);
    queues.set(id, tail);
    void tail.then(() => {
      if (queues.get(id) === tail) queues.delete(id);
    });
    return next;
  };

  /** Opens the session's index if the session exists and has not expired; the caller closes it. */
  const openIndex = (id: string, flags: number): { descriptor: number; size: number } | undefined => {
    let descriptor: number;
    try {
      descriptor = openSync(fileOf(id, INDEX), flags);
    } catch (error) {
      if (codeOf(error) === 'ENOENT') return undefined;
      throw error;
    }
    try {
      const info = fstatSync(descriptor);
      if (!expired(info.mtimeMs)) return { descriptor, size: info.size };
    } catch (error) {
      closeSync(descriptor);
      throw error;
    }
    closeSync(descriptor);
    return undefined;
  };

  const readInfo = (id: string): StoredInfo | undefined => {
    let text: string;
    try {
      text = readFileSync(fileOf(id, INFO), 'utf8');
    } catch (error) {
      if (codeOf(error) === 'ENOENT') return undefined;
      throw error;
    }
    let stored: unknown;
    try {
      stored = JSON.parse(text);
    } catch (error) {
      throw new AgentError('STORE_ERROR', `Session ${id} has a damaged record`, { cause: error });
    }
    const { status, interactionId, owner } = (stored ?? {}) as Partial<Record<keyof StoredInfo, unknown>>;
    checkStoredSession(id, { status, interactionId, owner });
    return stored as StoredInfo;
  };

  const writeInfo = (id: string, info: StoredInfo): void => {
    const file = fileOf(id, INFO);
    const temporary = `${file}.${randomUUID()}.tmp`;
    try {
      writeFileSync(temporary, JSON.stringify(info), 'utf8');
      renameSync(temporary, file);
    } catch (error) {
      rmSync(temporary, { force: true });
      throw error;
    }
  };

  /** Moves a session's folder out of the way (at once, for every reader) and deletes it. */
  const remove = async (id: string, lock: FileLock): Promise<void> => {
    const trash = path.join(directory, `${randomUUID()}.removed`);
    try {
      renameSync(folderOf(id), trash);
    } catch (error) {
      if (codeOf(error) === 'ENOENT') return;
      throw error;
    }
    lock.forget();
    await rm(trash, { recursive: true, force: true });
  };

  /** Expired, or a create that never finished and is older than the time to live. */
  const abandoned = async (id: string): Promise<boolean> => {
    for (const name of [INDEX, INFO, '.']) {
      try {
        return expired((await stat(fileOf(id, name))).mtimeMs);
      } catch (error) {
        if (codeOf(error) !== 'ENOENT') return false;
      }
    }
    return false;
  };

  // The sweep walks the whole folder, so it stays asynchronous; it runs after writes, at most
  // once every tenth of the time to live (between 1 s and 10 min).
  const sweep = async (): Promise<void> => {
    if (sweeping || Date.now() - lastSweep < sweepEveryMs) return;
    sweeping = true;
    lastSweep = Date.now();
    try {
      const names = await readdir(directory).catch(() => [] as string[]);
      for (const name of names) {
        if (name.endsWith('.removed')) {
          // A removal that a crash interrupted.
          await rm(path.join(directory, name), { recursive: true, force: true }).catch(() => undefined);
          continue;
        }
        if (!name.endsWith('.session')) continue;
        const id = name.slice(0, -'.session'.length);
        if (!SAFE_ID.test(id) || !(await abandoned(id))) continue;
        await locked(id, async (lock) => {
          if (await abandoned(id)) await remove(id, lock);
        }).catch(() => undefined);
      }
    } finally {
      sweeping = false;
    }
  };

  const afterWrite = () => {
    void sweep().catch(() => undefined);
  };

  return {
    async create(id, info) {
      checkId(id);
      const stored: StoredInfo = { status: 'running', interactionId: info.interactionId };
      if (info.owner !== undefined) stored.owner = info.owner;
      const claim = (): boolean => {
        try {
          if (!expired(statSync(fileOf(id, INDEX)).mtimeMs)) return false;
          // Expired: the id starts over. The index goes first, so a crash leaves no session.
          unlinkSync(fileOf(id, INDEX));
          rmSync(fileOf(id, EVENTS), { force: true });
        } catch (error) {
          if (codeOf(error) !== 'ENOENT') throw error;
        }
        writeInfo(id, stored);
        // The index is created last: a session exists once it has one.
        writeFileSync(fileOf(id, INDEX), new Uint8Array(0), { flag: 'wx' });
        return true;
      };
      for (let attempt = 1; ; attempt += 1) {
        try {
          mkdirSync(folderOf(id), { recursive: true });
          const created = await locked(id, claim);
          afterWrite();
          return created;
        } catch (error) {
          // A sweep may remove the folder of an expired session between our mkdir and our lock.
          if (codeOf(error) !== 'ENOENT' || attempt === 3) throw storeFailure('file', `create session ${id}`, error);
        }
      }
    },

    async get(id) {
      checkId(id);
      try {
        const index = openIndex(id, constants.O_RDONLY);
        if (!index) return undefined;
        let committed: Committed;
        try {
          committed = committedOf(index.descriptor, index.size);
        } finally {
          closeSync(index.descriptor);
        }
        const stored = readInfo(id);
        if (!stored) return undefined;
        const info: SessionInfo = { status: stored.status, eventCount: committed.count };
        if (stored.interactionId !== undefined) info.interactionId = stored.interactionId;
        if (stored.owner !== undefined) info.owner = stored.owner;
        return info;
      } catch (error) {
        throw storeFailure('file', `read session ${id}`, error);
      }
    },

    async append(id, events) {
      checkId(id);
      const texts = events.map((event, position) => {
        if (typeof event !== 'string') throw new AgentError('BAD_REQUEST', `Session ${id}: events[${position}] must be a string`);
        return Buffer.from(event, 'utf8');
      });
      let first: number;
      try {
        first = await locked(id, () => {
          const index = openIndex(id, constants.O_RDWR);
          if (!index) throw new AgentError('NOT_FOUND', `Session ${id} not found`);
          try {
            const committed = committedOf(index.descriptor, index.size);
            if (texts.length === 0) return committed.count;
            const entries = Buffer.alloc(texts.length * ENTRY_BYTES);
            let end = committed.end;
            texts.forEach((text, position) => {
              end += text.length;
              writeEntry(entries, position * ENTRY_BYTES, end, crc32(text), position === texts.length - 1);
            });
            // The texts first, at the end of the last complete append (over whatever a crashed
            // one left there): until its entries are written, nobody sees them.
            const data = openSync(fileOf(id, EVENTS), constants.O_RDWR | constants.O_CREAT);
            try {
              writeFully(data, texts.length === 1 ? (texts[0] as Buffer) : Buffer.concat(texts), committed.end);
            } finally {
              closeSync(data);
            }
            writeFully(index.descriptor, entries, committed.count * ENTRY_BYTES);
            return committed.count;
          } finally {
            closeSync(index.descriptor);
          }
        });
      } catch (error) {
        // The session's folder is gone: it expired and was swept, or never existed.
        if (codeOf(error) === 'ENOENT') throw new AgentError('NOT_FOUND', `Session ${id} not found`);
        throw storeFailure('file', `append to session ${id}`, error);
      }
      afterWrite();
      return first;
    },

    async read(id, after, limit) {
      checkId(id);
      const start = Math.max(0, Math.floor(after) + 1);
      const count = Math.floor(limit);
      if (!(count > 0) || !Number.isFinite(start)) return [];
      try {
        const index = openIndex(id, constants.O_RDONLY);
        if (!index) return [];
        let ends: number[];
        let checksums: number[];
        let from: number;
        try {
          const committed = committedOf(index.descriptor, index.size);
          if (start >= committed.count) return [];
          const stop = Math.min(committed.count, start + count);
          // The entry before the first gives where the first event begins.
          from = Math.max(0, start - 1);
          const entries = readFully(index.descriptor, (stop - from) * ENTRY_BYTES, from * ENTRY_BYTES);
          if (entries.length < (stop - from) * ENTRY_BYTES) throw damaged(id, from + Math.floor(entries.length / ENTRY_BYTES));
          ends = [];
          checksums = [];
          for (let offset = 0; offset < entries.length; offset += ENTRY_BYTES) {
            if (!validEntry(entries, offset)) throw damaged(id, from + offset / ENTRY_BYTES);
            ends.push(entries.readUIntLE(offset, 6));
            checksums.push(entries.readUInt32LE(offset + 8));
          }
        } finally {
          closeSync(index.descriptor);
        }
        const skip = start - from;
        const begin = skip === 1 ? (ends[0] as number) : 0;
        const finish = ends[ends.length - 1] as number;
        if (finish < begin) throw damaged(id, start);
        let bytes: Buffer;
        try {
          const data = openSync(fileOf(id, EVENTS), constants.O_RDONLY);
          try {
            bytes = readFully(data, finish - begin, begin);
          } finally {
            closeSync(data);
          }
        } catch (error) {
          throw codeOf(error) === 'ENOENT' ? damaged(id, start) : error;
        }
        const result: string[] = [];
        let position = 0;
        for (let entry = skip; entry < ends.length; entry += 1) {
          const next = (ends[entry] as number) - begin;
          if (next < position || next > bytes.length || crc32(bytes.subarray(position, next)) !== checksums[entry]) throw damaged(id, from + entry);
          result.push(bytes.toString('utf8', position, next));
          position = next;
        }
        return result;
      } catch (error) {
        throw storeFailure('file', `read session ${id}`, error);
      }
    },

    async update(id, change, from) {
      checkId(id);
      let changed: boolean;
      try {
        changed = await locked(id, () => {
          const index = openIndex(id, constants.O_RDONLY);
          if (!index) return false;
          closeSync(index.descriptor);
          const stored = readInfo(id);
          if (!stored || (from && !from.includes(stored.status))) return false;
          const next: StoredInfo = { ...stored, status: change.status };
          if (change.interactionId === null) delete next.interactionId;
          else if (change.interactionId !== undefined) next.interactionId = change.interactionId;
          writeInfo(id, next);
          // The index's modification time is the session's last write, for the time to live.
          const now = new Date();
          utimesSync(fileOf(id, INDEX), now, now);
          return true;
        });
      } catch (error) {
        if (codeOf(error) === 'ENOENT') return false;
        throw storeFailure('file', `update session ${id}`, error);
      }
      afterWrite();
      return changed;
    },
  };
}

function writeEntry(entries: Buffer, offset: number, end: number, checksum: number, last: boolean): void {
  entries.writeUIntLE(end, offset, 6);
  entries[offset + 6] = last ? LAST_OF_APPEND : 0;
  entries[offset + 7] = ENTRY_MARK;
  entries.writeUInt32LE(checksum, offset + 8);
  entries.writeUInt32LE(crc32(entries.subarray(offset, offset + 12)), offset + 12);
}

function validEntry(entries: Buffer, offset: number): boolean {
  return entries[offset + 7] === ENTRY_MARK && crc32(entries.subarray(offset, offset + 12)) === entries.readUInt32LE(offset + 12);
}

/** The complete appends of an index of `size` bytes: up to its last valid entry that ends an append. */
function committedOf(descriptor: number, size: number): Committed {
  let stop = Math.floor(size / ENTRY_BYTES);
  while (stop > 0) {
    const first = Math.max(0, stop - TAIL_ENTRIES);
    const entries = readFully(descriptor, (stop - first) * ENTRY_BYTES, first * ENTRY_BYTES);
    // Shorter than asked when a repair shortened the file since it was measured.
    for (let entry = Math.floor(entries.length / ENTRY_BYTES) - 1; entry >= 0; entry -= 1) {
      const offset = entry * ENTRY_BYTES;
      if (validEntry(entries, offset) && ((entries[offset + 6] as number) & LAST_OF_APPEND) !== 0) {
        return { count: first + entry + 1, end: entries.readUIntLE(offset, 6) };
      }
    }
    stop = first;
  }
  return { count: 0, end: 0 };
}

/** Reads up to `length` bytes at `position`; shorter only at the end of the file. */
function readFully(descriptor: number, length: number, position: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  let filled = 0;
  while (filled < length) {
    const bytesRead = readSync(descriptor, buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled === length ? buffer : buffer.subarray(0, filled);
}

function writeFully(descriptor: number, data: Buffer, position: number): void {
  let written = 0;
  while (written < data.length) written += writeSync(descriptor, data, written, data.length - written, position + written);
}

function damaged(id: string, index: number): AgentError {
  return new AgentError('STORE_ERROR', `Session ${id} has a damaged event log at event ${index}`);
}
