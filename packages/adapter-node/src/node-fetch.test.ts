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
});
