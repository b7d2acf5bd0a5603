import type { InteractionStore } from '@org/core';

/** Options of {@link createIndexedDbInteractionStore}. */
export interface IndexedDbInteractionStoreOptions {
  /** Database name. Default `org-agent`. */
  databaseName?: string;
  /** Object store name inside the database. Default `interactions`. */
  storeName?: string;
  /** Entries older than this are treated as absent (and removed when seen). Default: kept until taken. */
  ttlMs?: number;
  /** The IndexedDB factory. Default: the page's `indexedDB`. */
  indexedDB?: IDBFactory;
  /** Clock, for expiry. */
  now?: () => number;
}

interface StoredEntry {
  json: string;
  savedAt: number;
}

/**
 * An `InteractionStore` in the browser's IndexedDB, so a suspended in-page run survives a reload
 * and is resumed at most once even across tabs: `take` reads and deletes in one read-write
 * transaction, which IndexedDB runs one at a time for the same store.
 *
 * Values are kept as JSON text, so what is stored is exactly what a server store would keep.
 *
 * @example
 * ```ts
 * const store = createIndexedDbInteractionStore({ databaseName: 'my-app' });
 * await store.save('i-1', { version: 1 });
 * await store.take('i-1'); // -> { version: 1 }, and it is gone
 * ```
 */
export function createIndexedDbInteractionStore(options: IndexedDbInteractionStoreOptions = {}): InteractionStore & {
  /** Closes the database connection; the next call opens it again. */
  close(): void;
} {
  const databaseName = options.databaseName ?? 'org-agent';
  const storeName = options.storeName ?? 'interactions';
  const now = options.now ?? Date.now;
  const factory = options.indexedDB ?? globalThis.indexedDB;
  if (!factory) {
    throw new TypeError('createIndexedDbInteractionStore: no IndexedDB here; pass options.indexedDB');
  }
  let opening: Promise<IDBDatabase> | undefined;

  const database = (): Promise<IDBDatabase> => {
    opening ??= openDatabase(factory, databaseName, storeName).then((db) => {
      // Another tab upgrading the schema: let it, and reopen on the next call.
      db.onversionchange = () => {
        db.close();
        opening = undefined;
      };
      return db;
    });
    opening.catch(() => {
      opening = undefined;
    });
    return opening;
  };

  const transact = async <T>(mode: IDBTransactionMode, work: (store: IDBObjectStore) => Promise<T> | T): Promise<T> => {
    const db = await database();
    const transaction = db.transaction(storeName, mode);
    const done = new Promise<void>((resolve, reject) => {
      transaction.oncomplete = () => resolve();
      transaction.onabort = () => reject(transaction.error ?? new Error('IndexedDB transaction aborted'));
      transaction.onerror = () => reject(transaction.error ?? new Error('IndexedDB transaction failed'));
    });
    const value = await work(transaction.objectStore(storeName));
    await done;
    return value;
  };

  const expired = (entry: StoredEntry | undefined): boolean =>
    entry !== undefined && options.ttlMs !== undefined && now() - entry.savedAt > options.ttlMs;

  return {
    async save(id, value) {
      const json = JSON.stringify(value);
      if (json === undefined) throw new TypeError(`Interaction ${id}: value is not JSON-serialisable`);
      const entry: StoredEntry = { json, savedAt: now() };
      await transact('readwrite', (store) => {
        store.put(entry, id);
      });
    },
    async take(id) {
      const entry = await transact('readwrite', async (store) => {
        const found = (await request(store.get(id))) as StoredEntry | undefined;
        if (found !== undefined) store.delete(id);
        return found;
      });
      if (entry === undefined || expired(entry)) return undefined;
      return JSON.parse(entry.json) as unknown;
    },
    async has(id) {
      const entry = await transact('readonly', (store) => request(store.get(id)) as Promise<StoredEntry | undefined>);
      if (expired(entry)) {
        await transact('readwrite', (store) => {
          store.delete(id);
        });
        return false;
      }
      return entry !== undefined;
    },
    async delete(id) {
      await transact('readwrite', (store) => {
        store.delete(id);
      });
    },
    close() {
      const pending = opening;
      opening = undefined;
      void pending?.then((db) => db.close());
    },
  };
}

function openDatabase(factory: IDBFactory, name: string, storeName: string): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const open = factory.open(name);
    open.onupgradeneeded = () => {
      if (!open.result.objectStoreNames.contains(storeName)) open.result.createObjectStore(storeName);
    };
    open.onsuccess = () => {
      const db = open.result;
      if (db.objectStoreNames.contains(storeName)) {
        resolve(db);
        return;
      }
      // The database exists without our store (another store name was used first): add it.
      const version = db.version + 1;
      db.close();
      const upgrade = factory.open(name, version);
      upgrade.onupgradeneeded = () => upgrade.result.createObjectStore(storeName);
      upgrade.onsuccess = () => resolve(upgrade.result);
      upgrade.onerror = () => reject(upgrade.error);
    };
    open.onerror = () => reject(open.error ?? new Error(`Could not open IndexedDB database ${name}`));
    open.onblocked = () => reject(new Error(`IndexedDB database ${name} is blocked by another tab holding an older version open`));
  });
}

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}
