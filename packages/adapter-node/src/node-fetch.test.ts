import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createNodeFetch } from './node-fetch.js';

describe('createNodeFetch', () => {
  it('reuses kept-alive connections across requests', async () => {
    const ports = new Set<number>();
    const server = createServer((request, response) => {
      ports.add(request.socket.remotePort ?? 0);
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end(`hello ${request.method}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const pooled = createNodeFetch();
    try {
      for (let index = 0; index < 20; index += 1) expect(await (await pooled(url)).text()).toBe('hello GET');
      // Twenty sequential requests share the agent's warm sockets instead of opening one each.
      expect(ports.size).toBeLessThanOrEqual(2);
    } finally {
      await pooled.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('never queues a request behind two hundred streams that hang', async () => {
    const hung: Array<import('node:http').ServerResponse> = [];
    const server = createServer((request, response) => {
      if (request.url === '/hang') {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(': waiting\n\n');
        hung.push(response);
        return;
      }
      response.end('fresh');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pooled = createNodeFetch();
    const controller = new AbortController();
    try {
      const streams = await Promise.all(Array.from({ length: 200 }, () => pooled(`${base}/hang`, { signal: controller.signal })));
      expect(streams.every((response) => response.ok)).toBe(true);
      expect(hung).toHaveLength(200);
      expect(await (await pooled(`${base}/fresh`)).text()).toBe('fresh');
    } finally {
      controller.abort();
      for (const response of hung) response.destroy();
      await pooled.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('loads undici only when the first request goes out, and refuses requests once closed', async () => {
    const probe = `
      const { createNodeFetch } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
      const loaded = () => Object.keys(require.cache ?? {}).some((name) => name.includes('undici'));
      const pooled = createNodeFetch();
      const before = loaded();
      await pooled('http://127.0.0.1:9/').catch(() => undefined);
      const after = loaded();
      await pooled.close();
      const refused = await pooled('http://127.0.0.1:9/').then(() => 'sent', (error) => error.cause.message);
      console.log(JSON.stringify({ before, after, refused }));
    `;
    const { execFileSync } = await import('node:child_process');
    const output = execFileSync(process.execPath, ['--input-type=commonjs', '-e', `(async () => { ${probe} })()`], { encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual({ before: false, after: true, refused: 'This fetch was closed' });
  });
});
