import { createServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
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

  it('loads undici when the first request goes out, only its agent and fetch, and refuses requests once closed', async () => {
    const probe = `
      const { createNodeFetch } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
      const undiciModules = () => Object.keys(require.cache ?? {}).filter((name) => /[\\/]undici[\\/]/.test(name));
      const pooled = createNodeFetch();
      const before = undiciModules().length;
      await pooled('http://127.0.0.1:9/').catch(() => undefined);
      const after = undiciModules();
      await pooled.close();
      const refused = await pooled('http://127.0.0.1:9/').then(() => 'sent', (error) => error.cause.message);
      console.log(JSON.stringify({
        before,
        agentAndFetch: after.some((name) => /dispatcher[\\/]agent\\.js$/.test(name)) && after.some((name) => /fetch[\\/]index\\.js$/.test(name)),
        // Parts of the package a fetch has no use for, which its entry point would load.
        unused: after.filter((name) => /[\\/]lib[\\/](mock|cache|web[\\/](websocket|eventsource))[\\/]/.test(name)).length,
        entryPoint: after.some((name) => /[\\/]undici[\\/]index\\.js$/.test(name)),
        nodesOwnUndici: process.moduleLoadList.some((name) => name.includes('internal/deps/undici')),
        refused,
      }));
    `;
    const { execFileSync } = await import('node:child_process');
    const output = execFileSync(process.execPath, ['--input-type=commonjs', '-e', `(async () => { ${probe} })()`], { encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual({
      before: 0,
      agentAndFetch: true,
      unused: 0,
      entryPoint: false,
      nodesOwnUndici: false,
      refused: 'This fetch was closed',
    });
  });

  it('does not follow a redirect with a request body and its key header, unless asked; downloads follow', async () => {
    const seen: Array<{ url: string | undefined; key: string | undefined; body: string }> = [];
    const elsewhere = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        seen.push({ url: request.url, key: request.headers['x-goog-api-key'] as string | undefined, body });
        response.end(`landed ${request.method}`);
      });
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    const target = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/landed`;
    const redirecting = createServer((request, response) => {
      request.resume();
      response.writeHead(307, { location: target });
      response.end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/v1beta/models/m:streamGenerateContent`;
    const pooled = createNodeFetch();
    const post = (init: RequestInit = {}) =>
      pooled(url, { method: 'POST', headers: { 'x-goog-api-key': 'secret-key', 'content-type': 'application/json' }, body: '{"contents":[]}', ...init });
    try {
      const refused = await post().then(
        () => 'followed',
        (error: Error & { cause?: Error }) => `${error.message}: ${error.cause?.message}`,
      );
      expect(refused).toBe('fetch failed: unexpected redirect');
      expect(seen).toEqual([]);
      // Asked for in so many words, the redirect is followed, body and all.
      expect(await (await post({ redirect: 'follow' })).text()).toBe('landed POST');
      expect(seen).toEqual([{ url: '/landed', key: 'secret-key', body: '{"contents":[]}' }]);
      // A download has no body to resend: it follows as any fetch does.
      expect(await (await pooled(url)).text()).toBe('landed GET');
    } finally {
      await pooled.close();
      for (const server of [redirecting, elsewhere]) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
  });

  it('gives up on a connection whose TLS handshake never ends after connectTimeout', async () => {
    // Takes the TCP connection and never answers the TLS client hello.
    const accepted: Socket[] = [];
    const silent = createNetServer((socket) => {
      accepted.push(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const pooled = createNodeFetch({ connectTimeout: 100 });
    try {
      const outcome = await pooled(`https://127.0.0.1:${(silent.address() as AddressInfo).port}/`).then(
        () => 'answered',
        (error: Error & { cause?: Error & { code?: string } }) => `${error.message}: ${error.cause?.code}`,
      );
      expect(outcome).toBe('fetch failed: UND_ERR_CONNECT_TIMEOUT');
    } finally {
      await pooled.close();
      for (const socket of accepted) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('refuses timeouts that are not whole numbers of milliseconds when created, not on the first request', () => {
    expect(() => createNodeFetch({ bodyTimeout: -1 })).toThrow(/bodyTimeout must be a whole number of milliseconds of at least 0/);
    expect(() => createNodeFetch({ headersTimeout: 1.5 })).toThrow(/headersTimeout/);
    expect(() => createNodeFetch({ connectTimeout: Number.NaN })).toThrow(/connectTimeout/);
  });

  describe('against a hostile server', () => {
    let server: import('node:http').Server | undefined;
    const held: Array<import('node:http').ServerResponse> = [];
    let bytesSent = 0;
    afterEach(async () => {
      for (const response of held.splice(0)) response.destroy();
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
      server = undefined;
    });
    async function hostile(): Promise<string> {
      bytesSent = 0;
      server = createServer((request, response) => {
        if (request.url === '/stall-after-headers') {
          response.writeHead(200, { 'content-type': 'text/event-stream' });
          response.write('data: 1\n\n');
          held.push(response);
        } else if (request.url === '/stall-before-headers') {
          held.push(response);
        } else if (request.url?.startsWith('/loop')) {
          response.writeHead(302, { location: `/loop${Number(request.url.slice(5) || 0) + 1}` });
          response.end();
        } else {
          // Endless: writes while the socket takes it, then waits for it to drain.
          response.writeHead(200, { 'content-type': 'application/octet-stream' });
          const chunk = Buffer.alloc(64 * 1024, 97);
          const pump = (): void => {
            while (!response.destroyed) {
              bytesSent += chunk.byteLength;
              if (!response.write(chunk)) return;
            }
          };
          response.on('drain', pump);
          pump();
          held.push(response);
        }
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }

    it('closes the pool while an answer stalls after its headers, failing the read rather than waiting for the server', async () => {
      const base = await hostile();
      const pooled = createNodeFetch();
      const response = await pooled(`${base}/stall-after-headers`);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 1\n\n');
      const nextRead = reader.read().then(
        () => 'read',
        (error: Error & { cause?: Error }) => `${error.name}: ${error.cause?.message}`,
      );
      const waiting = pooled(`${base}/stall-before-headers`).then(
        () => 'answered',
        (error: Error & { cause?: Error }) => `${error.message}: ${error.cause?.message}`,
      );
      await expect.poll(() => held.length).toBe(2);
      await pooled.close();
      expect(await nextRead).toBe('TypeError: This fetch was closed');
      expect(await waiting).toBe('fetch failed: This fetch was closed');
      // The server sees both connections go.
      await expect.poll(() => held.every((answer) => answer.destroyed)).toBe(true);
    });

    it('gives up on answers whose headers or next body bytes take longer than headersTimeout and bodyTimeout', async () => {
      const base = await hostile();
      const pooled = createNodeFetch({ headersTimeout: 100, bodyTimeout: 100 });
      const causeOf = (error: Error & { cause?: Error & { code?: string } }) => `${error.name}: ${error.cause?.code}`;
      try {
        expect(await pooled(`${base}/stall-before-headers`).then(() => 'answered', causeOf)).toBe('TypeError: UND_ERR_HEADERS_TIMEOUT');
        const response = await pooled(`${base}/stall-after-headers`);
        expect(await response.text().then(() => 'read', causeOf)).toBe('TypeError: UND_ERR_BODY_TIMEOUT');
      } finally {
        await pooled.close();
      }
    });

    it('stops after 20 redirects of a loop with a TypeError', async () => {
      const base = await hostile();
      const pooled = createNodeFetch();
      try {
        const outcome = await pooled(`${base}/loop`).then(
          () => 'followed',
          (error: Error & { cause?: Error }) => `${error.message}: ${error.cause?.message}`,
        );
        expect(outcome).toBe('fetch failed: redirect count exceeded');
      } finally {
        await pooled.close();
      }
    });

    it('reads an endless answer only as fast as the caller does, and closes while it is half read', async () => {
      const base = await hostile();
      const pooled = createNodeFetch();
      const response = await pooled(`${base}/endless`);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      let received = 0;
      while (received < 1024 * 1024) received += (await reader.read()).value?.byteLength ?? 0;
      // The caller stops reading: the server soon cannot write more, whatever the socket buffers took.
      let settled = 0;
      await expect
        .poll(
          async () => {
            const before = bytesSent;
            await new Promise((resolve) => setTimeout(resolve, 150));
            settled = bytesSent;
            return bytesSent === before;
          },
          { timeout: 10_000, interval: 10 },
        )
        .toBe(true);
      expect(settled).toBeLessThan(64 * 1024 * 1024);
      // The body is never read to its end, yet the pool closes, and with it the connection.
      await pooled.close();
      await expect.poll(() => held[0]?.destroyed).toBe(true);
      await expect(reader.read()).rejects.toThrow(TypeError);
    });
  });
});
