import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentError, DEFAULT_INTERACTION_TTL_MS, type InteractionRecord, type InteractionStore } from '@org/core';
import { acquireFileLock, codeOf, type FileLock } from './file-lock.js';

/** Options of {@link createFileInteractionStore}. */
export interface FileInteractionStoreOptions {
  /** Folder for the files; created when missing. Several processes may share it. */
  directory: string;
  /** Records not written for this long are gone. Default 7 days. */
  ttlMs?: number;
  /** The largest state kept, in UTF-8 bytes. Default: the runtime's limit (64 MiB). */
  maxStateBytes?: number;
}

const SAFE_ID = /^[A-Za-z0-9._-]{1,200}$/;
/** A lock this old is taken over even when its holder may be alive (one whose process died goes at once). */
const STALE_LOCK_MS = 10_000;
/** How long a write waits for another process's lock before giving up. */
const LOCK_WAIT_MS = 5_000;
/** Expired records are swept at most this often. */
const SWEEP_EVERY_MS = 60_000;

/** `<id>.meta`: the record's meta, version, write time, and which state file is current. */
interface MetaFile {
  meta: string;
  version: string;
  writtenAt: number;
  stateFile: string;
}

/**
 * An `InteractionStore` in a folder that several processes may share: per record a small
 * `<id>.meta` file and a state file, both replaced by writing a temporary file and renaming it,
 * so a reader never sees half a record. Conditional writes hold a per-record lock file created
 * exclusively (`O_EXCL`) that names its holder: a lock left by a process of this host that died
 * is taken over at once, any other after 10 s. Records older than `ttlMs` read as absent and
 * are swept from the folder.
 *
 * Errors name the interaction, never the folder. A meta file the store did not write (edited by
 * hand, naming another file) is a `STORE_ERROR`, never followed.
 *
 * @example
 * ```ts
 * const store = createFileInteractionStore({ directory: '.data/interactions' });
 * ```
 */
export function createFileInteractionStore(options: FileInteractionStoreOptions): InteractionStore {
  const directory = path.resolve(options.directory);
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  let ready: Promise<unknown> | undefined;
  let lastSweep = 0;
  const ensureDirectory = () => (ready ??= mkdir(directory, { recursive: true }));
  const fileOf = (id: string, suffix: string): string => path.join(directory, `${id}${suffix}`);
  const checkId = (id: string): void => {
    if (!SAFE_ID.test(id) || id === '.' || id === '..') {
      throw new AgentError('BAD_REQUEST', `Interaction id "${id.slice(0, 80)}" may only hold 1 to 200 letters, digits, ".", "_" and "-"`);
    }
  };

  const readMeta = async (id: string): Promise<MetaFile | undefined> => {
    let text: string;
    try {
      text = await readFile(fileOf(id, '.meta'), 'utf8');
    } catch (error) {
      if (codeOf(error) === 'ENOENT') return undefined;
      throw failure(id, 'read', error);
    }
    const meta = parseMetaFile(id, text);
    if (!meta) throw new AgentError('STORE_ERROR', `Interaction ${id} has a damaged record`);
    if (Date.now() - meta.writtenAt >= ttlMs) return undefined;
    return meta;
  };

  /** The meta file as it is, expired or not; `undefined` when missing or damaged (a write replaces it). */
  const readMetaRaw = async (id: string): Promise<MetaFile | undefined> => {
    try {
      return parseMetaFile(id, await readFile(fileOf(id, '.meta'), 'utf8'));
    } catch {
      return undefined;
    }
  };

  const writeAtomically = async (file: string, text: string): Promise<void> => {
    // Not `<file>.<uuid>.tmp`: for ids near 200 characters that name would pass the file
    // systems' 255-byte limit.
    const temporary = path.join(directory, `${randomUUID()}.tmp`);
    try {
      await writeFile(temporary, text, 'utf8');
      await rename(temporary, file);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
  };

  const withLock = async <T>(id: string, action: string, body: () => Promise<T>): Promise<T> => {
    try {
      await ensureDirectory();
    } catch (error) {
      ready = undefined;
      throw failure(id, action, error);
    }
    // The lock names its holder, so one left by a process that died is taken over at once, and
    // of several processes breaking an old lock together only one ends up holding it.
    let lock: FileLock;
    try {
      lock = await acquireFileLock(fileOf(id, '.lock'), { waitMs: LOCK_WAIT_MS, staleMs: STALE_LOCK_MS });
    } catch (error) {
      if (codeOf(error) === 'ELOCKED') throw new AgentError('STORE_ERROR', `Could not ${action} interaction ${id}: it stayed locked by another process`);
      throw failure(id, action, error);
    }
    try {
      return await body();
    } finally {
      lock.release();
    }
  };

  const sweep = async (): Promise<void> => {
    const now = Date.now();
    if (now - lastSweep < Math.min(SWEEP_EVERY_MS, ttlMs)) return;
    lastSweep = now;
    const names = await readdir(directory).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.endsWith('.meta')) continue;
      const id = name.slice(0, -'.meta'.length);
      if (!SAFE_ID.test(id)) continue;
      const meta = await readMetaRaw(id);
      if (meta && now - meta.writtenAt >= ttlMs) {
        await withLock(id, 'expire', async () => {
          const current = await readMetaRaw(id);
          if (current && Date.now() - current.writtenAt >= ttlMs) await removeRecord(id, current);
        }).catch(() => undefined);
      }
    }
  };

  const removeRecord = async (id: string, meta: MetaFile): Promise<void> => {
    await rm(fileOf(id, '.meta'), { force: true });
    await rm(path.join(directory, meta.stateFile), { force: true });
  };

  return {
    ...(options.maxStateBytes === undefined ? {} : { maxStateBytes: options.maxStateBytes }),
    async get(id) {
      checkId(id);
      // A writer may replace the state file between our two reads: read the meta again then.
      for (let attempt = 0; attempt < 3; attempt += 1) {
        const meta = await readMeta(id);
        if (!meta) return undefined;
        try {
          const state = await readFile(path.join(directory, meta.stateFile), 'utf8');
          const record: InteractionRecord = { meta: meta.meta, state, version: meta.version };
          return record;
        } catch (error) {
          if (codeOf(error) !== 'ENOENT') throw failure(id, 'read', error);
        }
      }
      throw new AgentError('STORE_ERROR', `Could not read interaction ${id}: it kept changing while being read`);
    },
    async set(id, write, expected) {
      checkId(id);
      const version = await withLock(id, 'save', async () => {
        // Read whatever is there, expired or not, so an expired record's state file is removed too.
        const previous = await readMetaRaw(id);
        const current = previous && Date.now() - previous.writtenAt < ttlMs ? previous : undefined;
        if (expected === null ? current !== undefined : current?.version !== expected) return undefined;
        if (write.state === undefined && !current) throw new AgentError('STORE_ERROR', `Interaction ${id}: a new record needs a state`);
        const next: MetaFile = {
          meta: write.meta,
          version: randomUUID(),
          writtenAt: Date.now(),
          stateFile: current?.stateFile ?? '',
        };
        try {
          if (write.state !== undefined) {
            next.stateFile = `${id}.${next.version}.state`;
            await writeAtomically(path.join(directory, next.stateFile), write.state);
          }
          await writeAtomically(fileOf(id, '.meta'), JSON.stringify(next));
        } catch (error) {
          if (write.state !== undefined) await rm(path.join(directory, next.stateFile), { force: true });
          throw failure(id, 'save', error);
        }
        if (write.state !== undefined && previous && previous.stateFile !== next.stateFile) {
          await rm(path.join(directory, previous.stateFile), { force: true });
        }
        return next.version;
      });
      void sweep();
      return version;
    },
    async delete(id, expected) {
      checkId(id);
      return withLock(id, 'delete', async () => {
        const current = await readMeta(id);
        if (!current || (expected !== undefined && current.version !== expected)) return false;
        await removeRecord(id, current);
        return true;
      });
    },
  };
}

/** What follows `<id>.` in the name of a state file: the version that wrote it. */
const STATE_FILE_TAIL = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.state$/;

/** The meta file of `id` if it is one this store wrote; `undefined` for anything else. */
function parseMetaFile(id: string, text: string): MetaFile | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { meta, version, writtenAt, stateFile } = value as Partial<Record<keyof MetaFile, unknown>>;
  if (typeof meta !== 'string' || typeof version !== 'string' || typeof writtenAt !== 'number' || !Number.isFinite(writtenAt)) return undefined;
  // The state file is always `<id>.<uuid>.state` in the store's folder. Any other name (a file
  // edited by hand, or copied from another record) would have us read, and later delete, a file
  // that is not this record's, possibly outside the folder.
  if (typeof stateFile !== 'string' || !stateFile.startsWith(`${id}.`) || !STATE_FILE_TAIL.test(stateFile.slice(id.length + 1))) return undefined;
  return { meta, version, writtenAt, stateFile };
}

/** A store failure that names the interaction and the system error code, never a path. */
function failure(id: string, action: string, error: unknown): AgentError {
  return new AgentError('STORE_ERROR', `Could not ${action} interaction ${id} (${codeOf(error) ?? 'error'})`, { cause: error });
}
