import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, type RunningServer } from '@org/adapter-node';
import { bundleForBrowser, launchChromium, type Browser, type Page } from '@org/browser-testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess } from './test-support/dev-process.js';

const HOSTILE_MARKDOWN = [
  '**Bold** and _quiet_ words.',
  '<img src="x" onerror="globalThis.pwned = 1">',
  '<script>globalThis.pwned = 2</script>',
  '<svg onload="globalThis.pwned = 3"><circle r="4"></circle></svg>',
  '[run me](javascript:globalThis.pwned=4) [page](data:text/html,<script>parent.pwned=5</script>) [web](https://example.com/docs)',
  '<a href="JaVaScRiPt:globalThis.pwned=6">mixed case</a> <iframe src="javascript:parent.pwned=7"></iframe>',
].join('\n\n');

type Rendered = {
  html: string;
  links: Array<{ href: string | null; target: string | null; rel: string | null }>;
  images: Array<string | null>;
  scripts: number;
  handlers: number;
};
type Checks = {
  fileData(uri: string): Rendered;
  source(uri: string): Rendered;
  inline(mimeType: string, data: string): Rendered;
  markdown(text: string): Rendered;
};

const children: ChildProcess[] = [];
let browser: Browser;
let renderServer: RunningServer;
let hostileModel: Server;
let storeDirectory = '';

beforeAll(async () => {
  const script = await bundleForBrowser(fileURLToPath(new URL('../test/playground-render-page.ts', import.meta.url)));
  renderServer = await serve({
    handler: async (request) =>
      new URL(request.url).pathname === '/page.js'
        ? new Response(script, { headers: { 'content-type': 'text/javascript' } })
        : new Response('<!doctype html><title>render</title><script type="module" src="/page.js"></script>', { headers: { 'content-type': 'text/html' } }),
  });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await renderServer?.close();
  for (const child of children) child.kill('SIGTERM');
  hostileModel?.closeAllConnections();
  await new Promise((resolve) => (hostileModel ? hostileModel.close(resolve) : resolve(undefined)));
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

async function renderPage(): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(renderServer.url);
  await page.waitForFunction(() => 'checks' in globalThis);
  return page;
}

const check = <K extends keyof Checks>(page: Page, name: K, ...args: Parameters<Checks[K]>): Promise<Rendered> =>
  page.evaluate(
    ([key, values]) => ((globalThis as unknown as { checks: Record<string, (...a: unknown[]) => Rendered> }).checks[key] as (...a: unknown[]) => Rendered)(...values),
    [name, args] as [string, unknown[]],
  );

describe('the playground renders hostile content safely (real Chromium)', () => {
  it('links a fileData URI or a search source only when it is http(s)', async () => {
    const page = await renderPage();
    for (const uri of ['javascript:alert(1)', ' JavaScript:alert(1)', 'data:text/html,<b>x</b>', 'vbscript:x', 'file:///etc/passwd', 'not a url']) {
      for (const kind of ['fileData', 'source'] as const) {
        const rendered = await check(page, kind, uri);
        expect(rendered.links, `${kind} ${uri}`).toEqual([]);
        expect(rendered.html).toContain('not an http(s) link');
      }
    }
    for (const uri of ['https://example.com/file.pdf', 'http://localhost:8080/x']) {
      const rendered = await check(page, 'fileData', uri);
      expect(rendered.links).toEqual([{ href: uri, target: '_blank', rel: 'noopener noreferrer' }]);
    }
    await page.close();
  });

  it('puts data: URLs only on media elements, and offers other inline data as a download', async () => {
    const page = await renderPage();
    const png = 'iVBORw0KGgo=';
    expect((await check(page, 'inline', 'image/png', png)).images).toEqual([`data:image/png;base64,${png}`]);
    for (const mimeType of ['text/html', 'image/svg+xml;charset=x" onerror="x', 'application/javascript']) {
      const rendered = await check(page, 'inline', mimeType, btoa('<script>parent.pwned=1</script>'));
      expect(rendered.images).toEqual([]);
      expect(rendered.links).toHaveLength(1);
      expect(rendered.links[0]?.href).toMatch(/^blob:/);
      expect(rendered.handlers).toBe(0);
    }
    await page.close();
  });

  it('renders markdown, and keeps no script, handler or non-http(s) link of it', async () => {
    const page = await renderPage();
    const rendered = await check(page, 'markdown', HOSTILE_MARKDOWN);
    expect(rendered.html).toContain('<strong>Bold</strong>');
    expect(rendered.html).toContain('<em>quiet</em>');
    expect(rendered.scripts).toBe(0);
    expect(rendered.handlers).toBe(0);
    expect(rendered.html).not.toContain('<iframe');
    expect(rendered.links.filter((link) => link.href !== null)).toEqual([{ href: 'https://example.com/docs', target: '_blank', rel: 'noopener noreferrer' }]);
    expect(rendered.images).toEqual([null]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await page.evaluate(() => (globalThis as { pwned?: unknown }).pwned)).toBeUndefined();
    await page.close();
  });
});

describe('the playground against a model that answers with hostile markdown', () => {
  it('shows the thought and the outcome as formatted text and runs none of it', async () => {
    hostileModel = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = {
          candidates: [
            {
              content: {
                role: 'model',
                parts: [
                  { text: HOSTILE_MARKDOWN, thought: true },
                  { functionCall: { name: 'system_objective_fulfilled', args: { objective_outcome: HOSTILE_MARKDOWN } } },
                ],
              },
              finishReason: 'STOP',
            },
          ],
        };
        response.end(`data: ${JSON.stringify(chunk)}\n\n`);
      });
    });
    await new Promise<void>((resolve) => hostileModel.listen(0, '127.0.0.1', resolve));
    storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'playground-safety-'));
    const { url } = await startDevProcess(
      { INTERACTION_STORE_DIR: storeDirectory, GEMINI_BASE_URL: `http://127.0.0.1:${(hostileModel.address() as AddressInfo).port}/v1beta` },
      children,
    );
    const page = await browser.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.goto(`${url}/`);
    await page.waitForSelector('body[data-ready=true]');
    await page.click('#run');
    const result = page.locator('#result[data-status=success]');
    await result.waitFor({ timeout: 30_000 });
    const thought = page.locator('#timeline > li[data-kind=thought]').first();
    for (const area of [thought, result]) {
      expect(await area.locator('strong').first().textContent()).toBe('Bold');
      expect(await area.locator('script, iframe').count()).toBe(0);
      const hrefs = await area.locator('a[href]').evaluateAll((links) => links.map((link) => link.getAttribute('href')));
      expect(hrefs).toEqual(['https://example.com/docs']);
      const handlers = await area.locator('*').evaluateAll((elements) => elements.filter((element) => [...element.attributes].some((attribute) => attribute.name.startsWith('on'))).length);
      expect(handlers).toBe(0);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await page.evaluate(() => (globalThis as { pwned?: unknown }).pwned)).toBeUndefined();
    expect(dialogs).toEqual([]);
    await page.close();
  });
});
