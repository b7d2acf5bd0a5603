import { AgentError, checkRecordId, DEFAULT_INTERACTION_TTL_MS, type InteractionRecord, type InteractionStore } from '@org/core';

/** Options of {@link createIndexedDbInteractionStore}. */
export interface IndexedDbInteractionStoreOptions {
  /** Database name. Default `org-agent`. */
  databaseName?: string;
  /** Object store of the records' meta; their states go in `<storeName>-states`. Default `interactions`. */
  storeName?: string;
  /** Records not written for this long read as absent, and are removed. Default 7 days. */
  ttlMs?: number;
  /**
   * The largest state kept, in UTF-8 bytes; the runtime refuses bigger ones with
   * `PAYLOAD_TOO_LARGE` before writing. Default: the runtime's limit (64 MiB).
   */
  maxStateBytes?: number;
  /** The IndexedDB factory. Default: the page's `indexedDB`; without one (or where reading it throws), every read or write is a `STORE_ERROR`. */
  indexedDB?: IDBFactory;
  /** Clock (epoch ms), for tests of expiry. */
  now?: () => number;
}

/** What the meta object store keeps per id. */
interface StoredRecord {
  meta: string;
  version: string;
  writtenAt: number;
}

/** The index of the meta object store by write time, for removing expired records. */
const WRITTEN_AT = 'writtenAt';

/** Expired records are swept at most this often. */
const SWEEP_EVERY_MS = 60_000;

/**
 * An `InteractionStore` in the browser's IndexedDB, so a suspended or interrupted in-page run
 * survives a reload, and two tabs never resume it at once: a conditional write reads the version
 * and writes in one read-write transaction, and IndexedDB runs read-write transactions on the
 * same object stores one at a time, across tabs.
 *
 * Meta and state live in two object stores, so a claim or lease renewal (meta alone) does not
 * copy the state again. Records expire `ttlMs` after their last write: they read as absent at
 * once, and writes sweep them from the database now and then.
 *
 * @example
 * ```ts
 * const store = createIndexedDbInteractionStore({ databaseName: 'my-app' });
 * const client = createLocalAgentClient({ geminiBaseUrl: '/gemini', store });
 * ```
 */
export function createIndexedDbInteractionStore(options: IndexedDbInteractionStoreOptions = {}): InteractionStore & {
  /** Closes the database connection; the next call opens it again. */
  close(): void;
} {
  const databaseName = options.databaseName ?? 'org-agent';
  const recordsName = options.storeName ?? 'interactions';
  const statesName = `${recordsName}-states`;
  const now = options.now ?? Date.now;
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  if (!(ttlMs > 0)) throw new TypeError(`createIndexedDbInteractionStore: ttlMs must be a positive number of milliseconds, got ${ttlMs}`);
  let factory: IDBFactory | undefined;
  let refusal: unknown;
  try {
    factory = options.indexedDB ?? globalThis.indexedDB;
  } catch (error) {
    // Some browsers throw on reading `indexedDB` where storage is disabled (Firefox with cookies
    // blocked for the site, sandboxed frames): as without one, only the store's own calls fail.
    refusal = error;
  }
  let opening: Opening | undefined;
  let lastSweep = 0;

  const database = (idb: IDBFactory): Promise<IDBDatabase> => {
    if (!opening) {
      const current = openDatabase(idb, databaseName, recordsName, statesName);
      const forget = () => {
        if (opening === current) opening = undefined;
      };
      current.connection.then((db) => {
        // Another tab upgrading the schema: let it, and reopen on the next call.
        db.onversionchange = () => {
          db.close();
          forget();
        };
        // The browser closed the connection itself (site data cleared, storage evicted): a closed
        // connection refuses every transaction, so reopen on the next call.
        db.onclose = forget;
      }, forget);
      opening = current;
    }
    // While another tab holds an older version open, the open request waits in IndexedDB's queue,
    // and so would any new one: every call fails at once instead of hanging, and the pending
    // request's connection is used once that tab lets go.
    return Promise.race([opening.connection, opening.blocked]);
  };

  /** Runs `work` in one transaction over both object stores and resolves once it committed. */
  const transact = async <T>(
    id: string,
    action: string,
    mode: IDBTransactionMode,
    work: (records: IDBObjectStore, states: IDBObjectStore) => Promise<T>,
  ): Promise<T> => {
    // A private window or an embedded browser may have no IndexedDB: only a write or read fails,
    // as when IndexedDB refuses to open, and a run that never needs the store is not stopped.
    if (!factory) {
      const reason = refusal === undefined ? 'there is no IndexedDB in this page' : `this page may not use IndexedDB (${refusal instanceof Error ? refusal.name : 'Error'})`;
      throw new AgentError('STORE_ERROR', `Could not ${action} interaction ${id}: ${reason} (pass options.indexedDB or another store)`, {
        ...(refusal === undefined ? {} : { cause: refusal }),
        details: { interactionId: id },
      });
    }
    try {
      const db = await database(factory);
      const transaction = db.transaction([recordsName, statesName], mode);
      const done = new Promise<void>((resolve, reject) => {
        transaction.oncomplete = () => resolve();
        transaction.onabort = () => reject(transaction.error ?? new DOMException('The transaction was aborted', 'AbortError'));
      });
      done.catch(() => undefined);
      let value: T;
      try {
        value = await work(transaction.objectStore(recordsName), transaction.objectStore(statesName));
      } catch (error) {
        try {
          transaction.abort();
        } catch {
          // Already finished or aborted.
        }
        throw error;
      }
      await done;
      return value;
    } catch (error) {
      if (error instanceof AgentError) throw error;
      const name = error instanceof Error ? error.name : 'Error';
      throw new AgentError('STORE_ERROR', `Could not ${action} interaction ${id} in IndexedDB (${name})`, { cause: error, details: { interactionId: id } });
    }
  };

  /** The record under `id` if it is one this store wrote and it has not expired. */
  const live = (found: unknown): StoredRecord | undefined => {
    const record = found as Partial<StoredRecord> | undefined;
    if (typeof record?.version !== 'string' || typeof record.meta !== 'string' || typeof record.writtenAt !== 'number') return undefined;
    return now() - record.writtenAt >= ttlMs ? undefined : (record as StoredRecord);
  };

  const sweep = async (): Promise<void> => {
    const current = now();
    if (current - lastSweep < Math.min(SWEEP_EVERY_MS, ttlMs)) return;
    lastSweep = current;
    await transact('(expired)', 'sweep', 'readwrite', (records, states) => {
      const cursor = records.index(WRITTEN_AT).openKeyCursor(IDBKeyRange.upperBound(current - ttlMs));
      return new Promise<void>((resolve, reject) => {
        cursor.onsuccess = () => {
          const found = cursor.result;
          if (!found) {
            resolve();
            return;
          }
          records.delete(found.primaryKey);
          states.delete(found.primaryKey);
          found.continue();
        };
        cursor.onerror = () => reject(cursor.error);
      });
    });
  };

  return {
    ...(options.maxStateBytes === undefined ? {} : { maxStateBytes: options.maxStateBytes }),
    async get(id) {
      checkRecordId('Interaction', id);
      return transact(id, 'read', 'readonly', async (records, states) => {
        const [found, state] = await Promise.all([request(records.get(id)), request(states.get(id))]);
        const record = live(found);
        if (!record || typeof state !== 'string') return undefined;
        const result: InteractionRecord = { meta: record.meta, state, version: record.version };
        return result;
      });
    },
    async set(id, write, expected) {
      checkRecordId('Interaction', id);
      if (expected === null && write.state === undefined) throw new AgentError('STORE_ERROR', `Interaction ${id}: a new record needs a state`);
      if (write.state !== undefined && options.maxStateBytes !== undefined) checkSize(id, write.state, options.maxStateBytes);
      const version = await transact(id, 'save', 'readwrite', async (records, states) => {
        const current = live(await request(records.get(id)));
        if (expected === null ? current !== undefined : current?.version !== expected) return undefined;
        const next: StoredRecord = { meta: write.meta, version: crypto.randomUUID(), writtenAt: now() };
        records.put(next, id);
        if (write.state !== undefined) states.put(write.state, id);
        return next.version;
      });
      void sweep().catch(() => undefined);
      return version;
    },
    async delete(id, expected) {
      checkRecordId('Interaction', id);
      return transact(id, 'delete', 'readwrite', async (records, states) => {
        const current = live(await request(records.get(id)));
        if (!current || (expected !== undefined && current.version !== expected)) return false;
        records.delete(id);
        states.delete(id);
        return true;
      });
    },
    close() {
      const pending = opening;
      opening = undefined;
      void pending?.connection.then((db) => db.close()).catch(() => undefined);
    },
  };
}

function checkSize(id: string, state: string, limit: number): void {
  // Three bytes per UTF-16 unit is the worst case, so short texts need no exact count.
  if (state.length * 3 <= limit) return;
  const size = new TextEncoder().encode(state).byteLength;
  if (size > limit) {
    throw new AgentError('PAYLOAD_TOO_LARGE', `Interaction ${id} is ${size} bytes of JSON, more than this store's limit of ${limit} bytes`, {
      details: { interactionId: id, size, limit },
    });
  }
}

/** Whether the database has both object stores and the write-time index. */
function hasSchema(db: IDBDatabase, recordsName: string, statesName: string): boolean {
  if (!db.objectStoreNames.contains(recordsName) || !db.objectStoreNames.contains(statesName)) return false;
  const transaction = db.transaction(recordsName, 'readonly');
  return transaction.objectStore(recordsName).indexNames.contains(WRITTEN_AT);
}

/** Adds whatever of the schema is missing, inside a version change. */
function addSchema(db: IDBDatabase, transaction: IDBTransaction | null, recordsName: string, statesName: string): void {
  const records = db.objectStoreNames.contains(recordsName) ? transaction?.objectStore(recordsName) : db.createObjectStore(recordsName);
  if (records && !records.indexNames.contains(WRITTEN_AT)) records.createIndex(WRITTEN_AT, WRITTEN_AT);
  if (!db.objectStoreNames.contains(statesName)) db.createObjectStore(statesName);
}

/** An open request: its connection, and a promise that rejects if another tab blocks it. */
interface Opening {
  connection: Promise<IDBDatabase>;
  blocked: Promise<never>;
}

function openDatabase(factory: IDBFactory, name: string, recordsName: string, statesName: string): Opening {
  let block: (error: DOMException) => void = () => undefined;
  const blocked = new Promise<never>((_resolve, reject) => {
    block = reject;
  });
  blocked.catch(() => undefined);
  const onblocked = () => block(new DOMException(`IndexedDB database ${name} is blocked by another tab holding an older version open`, 'BlockedError'));
  const connection = new Promise<IDBDatabase>((resolve, reject) => {
    const open = factory.open(name);
    open.onupgradeneeded = () => addSchema(open.result, open.transaction, recordsName, statesName);
    open.onsuccess = () => {
      const db = open.result;
      if (hasSchema(db, recordsName, statesName)) {
        resolve(db);
        return;
      }
      // The database exists without our object stores (another store name was used first, or
      // an older layout): add them.
      const version = db.version + 1;
      db.close();
      const upgrade = factory.open(name, version);
      upgrade.onupgradeneeded = () => addSchema(upgrade.result, upgrade.transaction, recordsName, statesName);
      upgrade.onsuccess = () => resolve(upgrade.result);
      upgrade.onerror = () => reject(upgrade.error);
      upgrade.onblocked = onblocked;
    };
    open.onerror = () => reject(open.error ?? new Error(`Could not open IndexedDB database ${name}`));
    open.onblocked = onblocked;
  });
  connection.catch(() => undefined);
  return { connection, blocked };
}

function request<T>(pending: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    pending.onsuccess = () => resolve(pending.result);
    pending.onerror = () => reject(pending.error);
  });
}
