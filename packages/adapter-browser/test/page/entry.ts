// Bundled into the test page: exposes the browser-side checks to the Node test through `window`.
import type { AgentEvent, InteractionStore, ResumeResponse } from '@org/core';
import { createGeminiBackendClient } from '@org/core/http';
import { createSimulatedGemini, runInteractionStoreConformance } from '@org/core/testing';
import { createBrowserAgentClient, createIndexedDbInteractionStore, type AgentClient } from '../../src/index.js';

/** How the scripted user answers: a name, then the second choice. */
const answers = (event: AgentEvent): ResumeResponse => {
  if (event.type === 'waitForInput') return { input: { role: 'user', parts: [{ text: 'Ada' }] } };
  if (event.type === 'waitForChoice') return { selected: { ids: [event.choices[1]?.id ?? ''] } };
  return {};
};

/** What two runs must agree on: the event types in order, with function names. */
function shape(events: AgentEvent[]): string[] {
  return events.map((event) => (event.type === 'functionCall' ? `functionCall:${event.name}` : event.type));
}

function localClient(databaseName: string): AgentClient {
  const gemini = createSimulatedGemini();
  const backend = createGeminiBackendClient({
    apiKey: 'simulated',
    fetch: (input, init) => gemini.fetch(new Request(input, init)),
  });
  return createBrowserAgentClient({ runIn: 'page', backend, store: createIndexedDbInteractionStore({ databaseName }) });
}

async function play(client: AgentClient, objective: string) {
  const run = client.startRun(objective, { onSuspend: answers });
  const events: AgentEvent[] = [];
  for await (const event of run.events) events.push(event);
  const result = await run.result;
  return { shape: shape(events), result };
}

const checks = {
  async conformance() {
    const names = new Map<InteractionStore, string>();
    return runInteractionStoreConformance(
      (options) => {
        const databaseName = `conformance-${crypto.randomUUID()}`;
        const store = createIndexedDbInteractionStore({ databaseName, ...options });
        names.set(store, databaseName);
        return store;
      },
      {
        async cleanup(stores) {
          for (const store of stores) {
            (store as ReturnType<typeof createIndexedDbInteractionStore>).close();
            await new Promise((resolve) => {
              const deletion = indexedDB.deleteDatabase(names.get(store) ?? '');
              deletion.onsuccess = deletion.onerror = deletion.onblocked = resolve;
            });
          }
        },
      },
    );
  },
  /** Writes a record, lets it expire, writes another: returns the ids left in each object store. */
  async expirySweep() {
    const databaseName = `sweep-${crypto.randomUUID()}`;
    const store = createIndexedDbInteractionStore({ databaseName, ttlMs: 200 });
    await store.set('old', { meta: '{}', state: '"old"' }, null);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await store.set('new', { meta: '{}', state: '"new"' }, null);
    await new Promise((resolve) => setTimeout(resolve, 100));
    store.close();
    const db = await openRaw(databaseName);
    const keys = async (name: string) => {
      const request = db.transaction(name).objectStore(name).getAllKeys();
      return new Promise<IDBValidKey[]>((resolve) => (request.onsuccess = () => resolve(request.result)));
    };
    const left = { records: await keys('interactions'), states: await keys('interactions-states') };
    db.close();
    return left;
  },
  /** Opens a database laid out by an earlier version of the store (one object store of `{json, savedAt}`). */
  async legacyDatabase() {
    const databaseName = `legacy-${crypto.randomUUID()}`;
    const legacy = await new Promise<IDBDatabase>((resolve) => {
      const open = indexedDB.open(databaseName, 1);
      open.onupgradeneeded = () => open.result.createObjectStore('interactions').put({ json: '{"version":1}', savedAt: Date.now() }, 'old');
      open.onsuccess = () => resolve(open.result);
    });
    legacy.close();
    const store = createIndexedDbInteractionStore({ databaseName });
    const old = await store.get('old');
    const created = await store.set('new', { meta: '{}', state: '"new"' }, null);
    const fresh = await store.get('new');
    store.close();
    return { old: old ?? null, created: typeof created, fresh: fresh?.state ?? null };
  },
  async local(objective: string) {
    return play(localClient('local-run'), objective);
  },
  /** An in-page run with no key, through a gateway that adds one: what reached the gateway. */
  async throughGateway(objective: string) {
    const gemini = createSimulatedGemini();
    const keys: Array<string | null> = [];
    const client = createBrowserAgentClient({
      runIn: 'page',
      geminiBaseUrl: `${location.origin}/gemini-gateway/v1beta`,
      fetch: async (input, init) => {
        const request = new Request(input, init);
        keys.push(request.headers.get('x-goog-api-key') ?? request.headers.get('authorization'));
        // The gateway: Google's path, with the key it keeps.
        const headers = new Headers(request.headers);
        headers.set('x-goog-api-key', 'gateway-key');
        const path = new URL(request.url).pathname.replace('/gemini-gateway', '');
        return gemini.fetch(new Request(`https://generativelanguage.googleapis.com${path}?alt=sse`, { method: request.method, headers, body: await request.text() }));
      },
      store: createIndexedDbInteractionStore({ databaseName: 'gateway-run' }),
    });
    const played = await play(client, objective);
    return { outcome: played.result.success, keys: [...new Set(keys)] };
  },
  /** What building an in-page client with no way to reach a model says, and when. */
  missingBackend() {
    try {
      createBrowserAgentClient({ runIn: 'page' });
      return 'built';
    } catch (error) {
      return `${(error as Error).name}: ${(error as Error).message}`;
    }
  },
  async remote(objective: string) {
    return play(createBrowserAgentClient({ runIn: 'server', baseUrl: location.origin }), objective);
  },
  /** Starts a local run and leaves it suspended at its first question; returns the interaction id. */
  async suspendLocally(objective: string) {
    const run = localClient('reload').startRun(objective);
    for await (const event of run.events) {
      if (event.type === 'waitForInput') return event.interactionId;
    }
    throw new Error('the run never asked for input');
  },
  /**
   * Two in-page runs with memory, the Drive client built from a token and pointed at this page's
   * origin (where the test server serves the fake Google Drive): what the second run says it remembers.
   */
  async memoryLocally(accessToken: string) {
    const gemini = createSimulatedGemini();
    const backend = createGeminiBackendClient({ apiKey: 'simulated', fetch: (input, init) => gemini.fetch(new Request(input, init)) });
    const client = createBrowserAgentClient({
      runIn: 'page',
      backend,
      accessToken: () => accessToken,
      driveBaseUrls: { drive: `${location.origin}/drive/v3`, upload: `${location.origin}/upload/drive/v3`, sheets: `${location.origin}/v4` },
      store: createIndexedDbInteractionStore({ databaseName: 'memory-runs' }),
    });
    const outcomes: string[] = [];
    for (const objective of ['Remember that I like tea.', 'Remember that I like coffee too.']) {
      const run = client.startRun({
        segments: [{ type: 'text', text: objective }, { type: 'tool', path: 'function-group/use-memory', title: 'Use Memory' }],
        graph: { url: 'drive:/browser-graph', title: 'Browser graph' },
      });
      for await (const event of run.events) void event;
      outcomes.push(JSON.stringify((await run.result).outcomes));
    }
    return outcomes;
  },
  /** Saves a record in a store kept open, so the test can clear the site's data under it. */
  async saveInOpenStore(databaseName: string) {
    const store = createIndexedDbInteractionStore({ databaseName });
    openStores.set(databaseName, store);
    return typeof (await store.set('before', { meta: '{}', state: '"before"' }, null));
  },
  /** Uses the store kept open by `saveInOpenStore` again: what a write and a read give. */
  async useOpenStore(databaseName: string) {
    const store = openStores.get(databaseName);
    if (!store) throw new Error(`no open store ${databaseName}`);
    const written = await store.set('after', { meta: '{}', state: '"after"' }, null).then((version) => typeof version, codeOf);
    const read = await store.get('after').then((record) => record?.state ?? null, codeOf);
    store.close();
    return { written, read };
  },
  /**
   * A connection to an older layout of the database stays open (another tab of an older app
   * version): the store's upgrade is blocked, and every call fails while it is. Once that
   * connection closes, the store works, and a later upgrade (a newer app version) is not blocked
   * by a connection the store left behind.
   */
  async blockedUpgrade() {
    const databaseName = `blocked-${crypto.randomUUID()}`;
    const older = await new Promise<IDBDatabase>((resolve) => {
      const open = indexedDB.open(databaseName, 1);
      open.onupgradeneeded = () => open.result.createObjectStore('legacy');
      open.onsuccess = () => resolve(open.result);
    });
    const store = createIndexedDbInteractionStore({ databaseName });
    const blocked = await store.set('x', { meta: '{}', state: '1' }, null).then((version) => typeof version, codeOf);
    // Still blocked: the store's next calls fail too, rather than wait behind the blocked upgrade.
    const stillBlocked = await store.get('x').then((record) => typeof record, codeOf);
    older.close();
    // An open request queued behind the store's upgrade succeeds once that upgrade has.
    (await openRaw(databaseName)).close();
    const after = await store.set('x', { meta: '{}', state: '1' }, null).then((version) => typeof version, codeOf);
    const upgrade = await new Promise<string>((resolve) => {
      const open = indexedDB.open(databaseName, 100);
      open.onblocked = () => resolve('blocked');
      open.onsuccess = () => {
        open.result.close();
        resolve('upgraded');
      };
      open.onerror = () => resolve(`error ${open.error?.name}`);
    });
    store.close();
    return { blocked, stillBlocked, after, upgrade };
  },
  /**
   * Overwrites the record saved by `saveInOpenStore` with a state of `bytes` characters: what the
   * write gives, and the state read afterwards.
   */
  async overwriteInOpenStore(databaseName: string, bytes: number) {
    const store = openStores.get(databaseName);
    if (!store) throw new Error(`no open store ${databaseName}`);
    const before = await store.get('before');
    const written = await store.set('before', { meta: '{}', state: JSON.stringify('x'.repeat(bytes)) }, before?.version ?? null).then((version) => typeof version, codeOf);
    const after = await store.get('before');
    store.close();
    return { written, kept: after?.version === before?.version ? after?.state : 'replaced' };
  },
  /** Interaction ids of several lengths and characters: what writing each gives. */
  async ids() {
    const store = createIndexedDbInteractionStore({ databaseName: `ids-${crypto.randomUUID()}` });
    const cases: Record<string, string> = {
      empty: '',
      longest: 'a'.repeat(512),
      tooLong: 'b'.repeat(513),
      huge: 'c'.repeat(1_000_000),
      control: 'a\u0000b',
      unicode: 'r\u00e9sum\u00e9-\u{1f984}-/..\\%2F',
    };
    const written: Record<string, string> = {};
    for (const [name, id] of Object.entries(cases)) {
      written[name] = await store.set(id, { meta: '{}', state: '1' }, null).then((version) => typeof version, (error: unknown) => {
        const message = (error as Error).message;
        return `${codeOf(error)}${message.length > 200 ? ' (long message)' : ''}`;
      });
    }
    const run = localClient('ids').resumeRun('d'.repeat(100_000), {});
    const errors: string[] = [];
    for await (const event of run.events) if (event.type === 'error') errors.push(event.code ?? 'none');
    store.close();
    return { written, resumed: errors };
  },
  /**
   * An in-page run with the default store in a page without IndexedDB (`missing`), or where
   * reading `indexedDB` throws, as Firefox does with the site's cookies blocked (`refused`): how
   * its result fails.
   */
  async withoutIndexedDb(objective: string, how: 'missing' | 'refused') {
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'indexedDB');
    const refuse = () => {
      throw new DOMException('The operation is insecure.', 'SecurityError');
    };
    Object.defineProperty(globalThis, 'indexedDB', how === 'missing' ? { value: undefined, configurable: true } : { get: refuse, configurable: true });
    try {
      const gemini = createSimulatedGemini();
      const backend = createGeminiBackendClient({ apiKey: 'simulated', fetch: (input, init) => gemini.fetch(new Request(input, init)) });
      const run = createBrowserAgentClient({ runIn: 'page', backend }).startRun(objective, { onSuspend: answers });
      const types: string[] = [];
      try {
        for await (const event of run.events) types.push(event.type);
      } catch {
        // The result says why.
      }
      const failure = await run.result.then(
        () => undefined,
        (error: { kind?: string; code?: string }) => ({ kind: error.kind, code: error.code }),
      );
      return { ranTurns: types.includes('functionCall'), failure };
    } finally {
      if (descriptor) Object.defineProperty(globalThis, 'indexedDB', descriptor);
    }
  },
  /** Writes `count` records; returns each one's version. */
  async seed(databaseName: string, count: number) {
    const store = createIndexedDbInteractionStore({ databaseName });
    const versions: Record<string, string> = {};
    for (let index = 0; index < count; index++) versions[`run-${index}`] = (await store.set(`run-${index}`, { meta: '{}', state: '"seed"' }, null)) ?? '';
    store.close();
    return versions;
  },
  /** Claims every record at the given version, all at once: the ids this tab won. */
  async claimAll(databaseName: string, versions: Record<string, string>, tab: string) {
    const store = createIndexedDbInteractionStore({ databaseName });
    const won = await Promise.all(
      Object.entries(versions).map(async ([id, version]) => ((await store.set(id, { meta: JSON.stringify({ tab }) }, version)) === undefined ? [] : [id])),
    );
    store.close();
    return won.flat();
  },
  /**
   * Resumes a saved run (in the `reload` database) with a model that does not answer until
   * `finishHeld()`; resolves once the run has claimed the interaction and called the model.
   */
  async holdResume(interactionId: string) {
    let release = () => undefined as void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let called = () => undefined as void;
    const modelCalled = new Promise<void>((resolve) => (called = resolve));
    const gemini = createSimulatedGemini();
    const backend = createGeminiBackendClient({
      apiKey: 'simulated',
      fetch: async (input, init) => {
        const request = new Request(input, init);
        called();
        await gate;
        return gemini.fetch(request);
      },
    });
    const client = createBrowserAgentClient({ runIn: 'page', backend, store: createIndexedDbInteractionStore({ databaseName: 'reload' }) });
    const run = client.resumeRun(interactionId, answers({ type: 'waitForInput' } as AgentEvent), { onSuspend: answers });
    const outcome = (async () => {
      for await (const event of run.events) void event;
      return run.result.then(
        (result) => (result.success ? 'complete' : 'failed'),
        (error: unknown) => codeOf(error),
      );
    })();
    held = { release, outcome };
    await modelCalled;
  },
  /** Lets the run held by `holdResume` go on: how it ends. */
  async finishHeld() {
    if (!held) throw new Error('no held run');
    held.release();
    return held.outcome;
  },
  /** After a reload: resumes the saved run from IndexedDB and finishes it. */
  async resumeLocally(interactionId: string) {
    const run = localClient('reload').resumeRun(interactionId, answers({ type: 'waitForInput' } as AgentEvent), { onSuspend: answers });
    const types: string[] = [];
    for await (const event of run.events) types.push(event.type);
    const outcome = await run.result.then(
      (result) => ({ result }),
      (error: Error) => ({ error: error.message, code: (error as { code?: string }).code }),
    );
    return { types, ...outcome };
  },
};

/** The run `holdResume` holds. */
let held: { release: () => void; outcome: Promise<string> } | undefined;

/** Stores kept open between two checks. */
const openStores = new Map<string, ReturnType<typeof createIndexedDbInteractionStore>>();

/** The code of a coded error, else its name. */
function codeOf(error: unknown): string {
  return (error as { code?: string }).code ?? (error as Error).name;
}

function openRaw(name: string): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open(name);
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
}

(globalThis as unknown as { checks: typeof checks }).checks = checks;
