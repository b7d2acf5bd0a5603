import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, type RunningServer } from '@org/adapter-node';
import { bundleForBrowser, launchChromium, type Browser, type Page } from '@org/browser-testing';
import { createAgentHandler, createGeminiBackendClient } from '@org/core/http';
import { createMemoryInteractionStore, createSimulatedGemini } from '@org/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess } from './test-support/dev-process.js';

// Three origins on loopback: the dev server (a real `pnpm dev` process), a site that serves the
// page, and a server built on the library defaults.
const children: ChildProcess[] = [];
let browser: Browser;
let site: RunningServer;
let library: RunningServer;
let devUrl = '';
let storeDirectory = '';
let libraryRunsStarted = 0;

type Outcome = { types: string[]; result?: string; error?: { kind: string; message: string } };

beforeAll(async () => {
  storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'cross-origin-'));
  ({ url: devUrl } = await startDevProcess({ INTERACTION_STORE_DIR: storeDirectory }, children));
  const script = await bundleForBrowser(fileURLToPath(new URL('../test/cross-origin-page.ts', import.meta.url)));
  const page = async (request: Request): Promise<Response> => {
    const { pathname } = new URL(request.url);
    if (pathname === '/page.js') return new Response(script, { headers: { 'content-type': 'text/javascript' } });
    return new Response('<!doctype html><title>site</title><script type="module" src="/page.js"></script>', {
      headers: { 'content-type': 'text/html' },
    });
  };
  site = await serve({ handler: page });
  const gemini = createSimulatedGemini();
  const backend = createGeminiBackendClient({ apiKey: 'simulated', fetch: (input, init) => gemini.fetch(new Request(input, init)) });
  const store = createMemoryInteractionStore();
  const agent = createAgentHandler({
    createPorts: () => {
      libraryRunsStarted += 1;
      return { backend, store };
    },
  });
  // The library server also serves the page itself, to show its own origin is welcome.
  library = await serve({ handler: (request) => (new URL(request.url).pathname.startsWith('/v1beta1/') ? agent(request) : page(request)) });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await site?.close();
  await library?.close();
  for (const child of children) child.kill('SIGTERM');
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

async function openSite(url: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(url);
  await page.waitForFunction(() => 'runAgainst' in globalThis);
  return page;
}

const runIn = (page: Page, baseUrl: string): Promise<Outcome> =>
  page.evaluate(
    ([target, objective]) => (globalThis as unknown as { runAgainst(url: string, text: string): Promise<Outcome> }).runAgainst(target, objective),
    [baseUrl, 'Ask me my name and greet me.'] as const,
  );

describe('a page on another origin, in Chromium', () => {
  it('runs start, suspend, resume and complete against the dev server through @org/core/client', async () => {
    expect(new URL(site.url).origin).not.toBe(new URL(devUrl).origin);
    const page = await openSite(site.url);
    const outcome = await runIn(page, devUrl);
    expect(outcome.error).toBeUndefined();
    expect(outcome.types).toContain('waitForInput');
    expect(outcome.types.at(-1)).toBe('complete');
    expect(outcome.result).toContain('Hello, Ada!');
    await page.close();
  });

  it('is refused by a server on the library default (same origin only), and nothing runs there', async () => {
    const page = await openSite(site.url);
    const outcome = await runIn(page, library.url);
    expect(outcome.types).toEqual([]);
    expect(outcome.error?.kind).toBe('network');
    expect(libraryRunsStarted).toBe(0);
    await page.close();

    // The library server's own page may call it.
    const own = await openSite(library.url);
    const sameOrigin = await runIn(own, library.url);
    expect(sameOrigin.error).toBeUndefined();
    expect(sameOrigin.result).toContain('Hello, Ada!');
    expect(libraryRunsStarted).toBe(2);
    await own.close();
  });
});
