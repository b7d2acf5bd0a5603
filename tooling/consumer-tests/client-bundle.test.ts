import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { launchChromium, type Browser } from '@org/browser-testing';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The budget of `@org/core/client` in a browser bundle, gzip. */
const GZIP_BUDGET = 15 * 1024;

/** What an app's bundler makes of `@org/core/client`: every export kept, minified, for browsers. */
async function bundleClient(): Promise<string> {
  const result = await build({
    stdin: { contents: "export * from '@org/core/client';", resolveDir: import.meta.dirname, loader: 'js' },
    bundle: true,
    minify: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

const STREAMS: Record<string, string[]> = {
  '/valid': [
    '{"start":{"objective":{"role":"user","parts":[{"text":"Hi"}]}}}',
    '{"functionCall":{"callId":"c1","name":"system_objective_fulfilled","args":{"objective_outcome":"Hello"},"newField":1}}',
    '{"finish":{}}',
    '{"complete":{"result":{"success":true,"outcomes":{"role":"user","parts":[{"text":"Hello"}]}}}}',
  ],
  '/invalid': [
    '{"start":{"objective":{"role":"user","parts":[{"text":"Hi"}]}}}',
    '{"functionCall":{"callId":7,"name":"system_objective_fulfilled","args":{}}}',
    '{"finish":{}}',
  ],
  '/invalid-part': ['{"content":{"content":{"role":"model","parts":[{"text":"a"},{"inlineData":{"mimeType":"image/png"}}]}}}'],
};

/** The page: runs the bundled client against one of the streams, reports events and outcome. */
const PAGE = `<!doctype html><title>client</title><script type="module">
import { createAgentClient } from '/client.js';
window.runScenario = async (path) => {
  const run = createAgentClient({ baseUrl: location.origin, path }).startRun('Hi');
  const seen = [];
  try {
    for await (const event of run.events) seen.push(event.type === 'functionCall' ? 'functionCall:' + event.newField : event.type);
  } catch {
    // The same failure rejects run.result, read below.
  }
  const outcome = await run.result.then(
    (result) => ({ success: result.success, outcomes: result.outcomes }),
    (error) => ({ name: error.name, kind: error.kind, message: error.message }),
  );
  return { seen, outcome };
};
</script>`;

describe('@org/core/client bundled for a browser', () => {
  let bundle = '';
  let server: Server;
  let origin = '';
  let browser: Browser;

  beforeAll(async () => {
    bundle = await bundleClient();
    server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      if (path === '/client.js') {
        response.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle);
      } else if (path === '/') {
        response.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
      } else if (request.method === 'POST' && STREAMS[path]) {
        request.resume();
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.end(STREAMS[path]!.map((line) => `data: ${line}\n\n`).join(''));
      } else {
        response.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => server?.close(resolve));
  });

  it(`is at most ${GZIP_BUDGET / 1024} KB gzip, with no schema library inside`, () => {
    const minified = Buffer.byteLength(bundle);
    const gzip = gzipSync(bundle, { level: 9 }).length;
    console.log(`@org/core/client browser bundle: ${(minified / 1024).toFixed(1)} KB minified, ${(gzip / 1024).toFixed(1)} KB gzip`);
    expect(gzip).toBeLessThanOrEqual(GZIP_BUDGET);
    expect(bundle).not.toContain('ZodError');
  });

  async function runInPage(path: string): Promise<{ seen: string[]; outcome: Record<string, unknown> }> {
    const page = await browser.newPage();
    try {
      await page.goto(`${origin}/`);
      await page.waitForFunction('typeof window.runScenario === "function"');
      return (await page.evaluate(`window.runScenario(${JSON.stringify(path)})`)) as { seen: string[]; outcome: Record<string, unknown> };
    } finally {
      await page.close();
    }
  }

  it('runs in Chromium: valid events arrive in order, unknown fields kept, and the run completes', async () => {
    const { seen, outcome } = await runInPage('/valid');
    expect(seen).toEqual(['start', 'functionCall:1', 'finish', 'complete']);
    expect(outcome).toEqual({ success: true, outcomes: { role: 'user', parts: [{ text: 'Hello' }] } });
  });

  it('refuses an invalid event in Chromium, naming the bad field, and stops there', async () => {
    const { seen, outcome } = await runInPage('/invalid');
    expect(seen).toEqual(['start']);
    expect(outcome).toEqual({
      name: 'AgentClientError',
      kind: 'protocol',
      message: 'The server sent an invalid event: functionCall.callId: expected string, got number',
    });
    const deep = await runInPage('/invalid-part');
    expect(deep.outcome.message).toBe('The server sent an invalid event: content.content.parts[1].inlineData.data: expected string, got undefined');
  });
});
