import { fileURLToPath } from 'node:url';
import { serve, type RunningServer } from '@org/adapter-node';
import { bundleForBrowser, launchChromium } from '@org/browser-testing';
import { createAgentHandler, createGeminiBackendClient } from '@org/core/http';
import { createFakeGoogleDrive, createMemoryInteractionStore, createSimulatedGemini } from '@org/core/testing';
import type { Browser, Page } from '@org/browser-testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Everything below runs in the real Chromium: the store, the in-page loop, and the remote client.
let browser: Browser;
let server: RunningServer;
let page: Page;
const OBJECTIVE = 'Ask for my name, then let me pick a time of day, and greet me.';
/** The Google Drive the page's in-page runs reach, served from the page's own origin. */
const google = createFakeGoogleDrive({ accessToken: 'ya29.page-user' });

beforeAll(async () => {
  const script = await bundleForBrowser(fileURLToPath(new URL('../test/page/entry.ts', import.meta.url)));
  const gemini = createSimulatedGemini();
  const backend = createGeminiBackendClient({ apiKey: 'simulated', fetch: (input, init) => gemini.fetch(new Request(input, init)) });
  const store = createMemoryInteractionStore();
  const agent = createAgentHandler({ createPorts: () => ({ backend, store }) });
  server = await serve({
    handler: async (request) => {
      const { pathname } = new URL(request.url);
      if (pathname === '/') return new Response('<!doctype html><title>test</title><script type="module" src="/entry.js"></script>', { headers: { 'content-type': 'text/html' } });
      if (pathname === '/entry.js') return new Response(script, { headers: { 'content-type': 'text/javascript' } });
      if (/^\/(drive|upload\/drive)\/v3\/|^\/v4\//.test(pathname)) return google.fetch(request);
      return agent(request);
    },
  });
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(server.url);
  await page.waitForFunction(() => 'checks' in globalThis);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

type Checks = {
  conformance(): Promise<Array<{ name: string; message: string }>>;
  local(objective: string): Promise<{ shape: string[]; result: { success: boolean; outcomes?: unknown } }>;
  remote(objective: string): Promise<{ shape: string[]; result: { success: boolean; outcomes?: unknown } }>;
  expirySweep(): Promise<{ records: string[]; states: string[] }>;
  legacyDatabase(): Promise<{ old: unknown; created: string; fresh: string | null }>;
  suspendLocally(objective: string): Promise<string>;
  resumeLocally(id: string): Promise<{ types: string[]; result?: { success: boolean; outcomes?: unknown }; error?: string; code?: string }>;
  seed(databaseName: string, count: number): Promise<Record<string, string>>;
  claimAll(databaseName: string, versions: Record<string, string>, tab: string): Promise<string[]>;
  holdResume(id: string): Promise<void>;
  finishHeld(): Promise<string>;
  overwriteInOpenStore(databaseName: string, bytes: number): Promise<{ written: string; kept: string | undefined }>;
  memoryLocally(accessToken: string): Promise<string[]>;
  saveInOpenStore(databaseName: string): Promise<string>;
  useOpenStore(databaseName: string): Promise<{ written: string; read: string | null }>;
  blockedUpgrade(): Promise<{ blocked: string; stillBlocked: string; after: string; upgrade: string }>;
  ids(): Promise<{ written: Record<string, string>; resumed: string[] }>;
  withoutIndexedDb(objective: string, how: 'missing' | 'refused'): Promise<{ ranTurns: boolean; failure?: { kind?: string; code?: string } }>;
  throughGateway(objective: string): Promise<{ outcome: boolean; keys: Array<string | null> }>;
  missingBackend(): string;
};
/** Calls `window.checks[name](...args)` in the page and returns what it resolves to. */
const inPage = <K extends keyof Checks>(name: K, ...args: Parameters<Checks[K]>): ReturnType<Checks[K]> => inTab(page, name, ...args);
/** The same in another tab. */
const inTab = <K extends keyof Checks>(tab: Page, name: K, ...args: Parameters<Checks[K]>): ReturnType<Checks[K]> =>
  tab.evaluate(
    ([check, values]: [string, unknown[]]) => {
      const checks = (globalThis as unknown as { checks: Record<string, (...a: unknown[]) => unknown> }).checks;
      return checks[check]?.(...values);
    },
    [name, args] as [string, unknown[]],
  ) as ReturnType<Checks[K]>;

describe('in Chromium', () => {
  it('the IndexedDB store passes the InteractionStore conformance suite', async () => {
    expect(await inPage('conformance')).toEqual([]);
  });

  it('removes expired records from the database on a later write', async () => {
    expect(await inPage('expirySweep')).toEqual({ records: ['new'], states: ['new'] });
  });

  it('opens a database of the earlier layout: adds what is missing, and its old entries read as absent', async () => {
    expect(await inPage('legacyDatabase')).toEqual({ old: null, created: 'string', fresh: '"new"' });
  });

  it('keeps working after the browser closed its connection (site data cleared)', async () => {
    expect(await inPage('saveInOpenStore', 'cleared-under')).toBe('string');
    const devtools = await page.context().newCDPSession(page);
    await devtools.send('Storage.clearDataForOrigin', { origin: new URL(server.url).origin, storageTypes: 'indexeddb' });
    await devtools.detach();
    expect(await inPage('useOpenStore', 'cleared-under')).toEqual({ written: 'string', read: '"after"' });
  });

  it('a write over the storage quota is a STORE_ERROR and keeps the record it would have replaced', async () => {
    // A fresh profile whose quota is set before the database is first opened (Chromium reads it then).
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      await tab.goto(server.url);
      await tab.waitForFunction(() => 'checks' in globalThis);
      const devtools = await context.newCDPSession(tab);
      await devtools.send('Storage.overrideQuotaForOrigin', { origin: new URL(server.url).origin, quotaSize: 4 * 1024 * 1024 });
      expect(await inTab(tab, 'saveInOpenStore', 'over-quota')).toBe('string');
      expect(await inTab(tab, 'overwriteInOpenStore', 'over-quota', 16 * 1024 * 1024)).toEqual({ written: 'STORE_ERROR', kept: '"before"' });
    } finally {
      await context.close();
    }
  });

  it('of two tabs claiming the same records at once, exactly one wins each', async () => {
    const context = await browser.newContext();
    try {
      const tabs = [await context.newPage(), await context.newPage()];
      for (const tab of tabs) {
        await tab.goto(server.url);
        await tab.waitForFunction(() => 'checks' in globalThis);
      }
      const [first, second] = tabs as [Page, Page];
      const versions = await inTab(first, 'seed', 'two-tabs', 20);
      const [wonByFirst, wonBySecond] = await Promise.all([inTab(first, 'claimAll', 'two-tabs', versions, 'first'), inTab(second, 'claimAll', 'two-tabs', versions, 'second')]);
      expect([...wonByFirst, ...wonBySecond].sort()).toEqual(Object.keys(versions).sort());
    } finally {
      await context.close();
    }
  });

  it('a run being resumed in one tab is refused with CONFLICT in another, and finishes in the first', async () => {
    const context = await browser.newContext();
    try {
      const [first, second] = [await context.newPage(), await context.newPage()];
      for (const tab of [first, second]) {
        await tab.goto(server.url);
        await tab.waitForFunction(() => 'checks' in globalThis);
      }
      const interactionId = await inTab(first, 'suspendLocally', OBJECTIVE);
      await inTab(first, 'holdResume', interactionId);
      const refused = await inTab(second, 'resumeLocally', interactionId);
      expect({ types: refused.types, code: refused.code }).toEqual({ types: ['error'], code: 'CONFLICT' });
      expect(await inTab(first, 'finishHeld')).toBe('complete');
    } finally {
      await context.close();
    }
  });

  it('an upgrade blocked by an older tab fails every call clearly instead of hanging, and leaves no connection behind to block the next', async () => {
    expect(await inPage('blockedUpgrade')).toEqual({ blocked: 'STORE_ERROR', stillBlocked: 'STORE_ERROR', after: 'string', upgrade: 'upgraded' });
  });

  it('refuses empty, over-long and control-character ids with BAD_REQUEST, as the server stores do', async () => {
    expect(await inPage('ids')).toEqual({
      written: { empty: 'BAD_REQUEST', longest: 'string', tooLong: 'BAD_REQUEST', huge: 'BAD_REQUEST', control: 'BAD_REQUEST', unicode: 'string' },
      resumed: ['BAD_REQUEST'],
    });
  });

  it('runs in the page without a key through a geminiBaseUrl gateway, sending it no credential', async () => {
    expect(await inPage('throughGateway', OBJECTIVE)).toEqual({ outcome: true, keys: [null] });
  });

  it('says when the in-page client is built, not when a run fails, that it has no way to reach a model', async () => {
    expect(await inPage('missingBackend')).toBe(
      'TypeError: createLocalAgentClient: pass `backend`, or `geminiApiKey` (or `geminiBaseUrl` of a gateway that adds the key) for the default Gemini backend',
    );
  });

  it('without IndexedDB an in-page run runs, and saving it is a STORE_ERROR of the run', async () => {
    expect(await inPage('withoutIndexedDb', OBJECTIVE, 'missing')).toEqual({ ranTurns: true, failure: { kind: 'run', code: 'STORE_ERROR' } });
  });

  it('where reading indexedDB throws (storage blocked), an in-page run still runs, and saving it is a STORE_ERROR, not a network failure', async () => {
    expect(await inPage('withoutIndexedDb', OBJECTIVE, 'refused')).toEqual({ ranTurns: true, failure: { kind: 'run', code: 'STORE_ERROR' } });
  });

  it('a local run and a remote run of the same scenario produce the same event sequence', async () => {
    const local = await inPage('local', OBJECTIVE);
    const remote = await inPage('remote', OBJECTIVE);
    expect(local.shape).toContain('waitForInput');
    expect(local.shape).toContain('waitForChoice');
    expect(local.shape.at(-1)).toBe('complete');
    expect(remote.shape).toEqual(local.shape);
    expect(remote.result).toEqual(local.result);
    expect(JSON.stringify(local.result.outcomes)).toContain('Hello, Ada!');
  });

  it('in-page runs given a token keep memory in Google Sheets through the Drive client it builds', async () => {
    const [first, second] = await inPage('memoryLocally', 'ya29.page-user');
    expect(first).toContain('I remember 1 note');
    expect(second).toContain('I remember 2 notes');
    expect(google.files()).toEqual([expect.objectContaining({ name: 'Memory for Browser graph' })]);
    expect(google.sheetValues(google.files()[0]?.id as string, 'memory')?.map((row) => row[1])).toEqual([
      'note',
      'Remember that I like tea.',
      'Remember that I like coffee too.',
    ]);
    // Every call carried the user's token (the fake refuses any other).
    expect(google.requests.every((request) => request.status < 300)).toBe(true);
  });

  it('a suspended in-page run survives a reload and is resumed once from IndexedDB', async () => {
    const interactionId = await inPage('suspendLocally', OBJECTIVE);
    await page.reload();
    await page.waitForFunction(() => 'checks' in globalThis);
    const resumed = await inPage('resumeLocally', interactionId);
    expect(resumed.types.at(-1)).toBe('complete');
    expect(JSON.stringify(resumed.result?.outcomes)).toContain('Hello, Ada!');
    const again = await inPage('resumeLocally', interactionId);
    expect(again.types).toEqual(['error']);
    expect(again.error).toBe(`Unknown interaction ID: ${interactionId}`);
  });
});
