import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP proxy for tests that can go silent: after {@link StallingProxy.stall}, the connections
 * open at that moment never carry another byte either way (a half-open connection, a dropped
 * route, a frozen server), while connections opened afterwards work normally.
 */
export interface StallingProxy {
  /** `127.0.0.1:<port>` of the proxy. */
  host: string;
  port: number;
  stall(): void;
  stop(): Promise<void>;
}

/** Starts a {@link StallingProxy} on a free loopback port in front of `target`. */
async function startStallingProxy(target: { host: string; port: number }): Promise<StallingProxy> {
  const pairs: Array<{ client: Socket; upstream: Socket; stalled: boolean }> = [];
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    const pair = { client, upstream, stalled: false };
    pairs.push(pair);
    client.on('data', (chunk) => pair.stalled || upstream.write(chunk));
    upstream.on('data', (chunk) => pair.stalled || client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    // A stalled connection stays open, as a half-open one would.
    client.on('close', () => pair.stalled || end());
    upstream.on('close', () => pair.stalled || end());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    stall() {
      for (const pair of pairs) pair.stalled = true;
    },
    async stop() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A proxy in front of the server `serverUrl` names (a `redis://` or `postgres://` URL), and that
 * URL with the proxy's port: a client given it reaches the server until the test stalls the proxy.
 */
export async function stallingProxyFor(serverUrl: string): Promise<{ proxy: StallingProxy; url: string }> {
  const target = new URL(serverUrl);
  const proxy = await startStallingProxy({ host: target.hostname, port: Number(target.port) });
  target.port = String(proxy.port);
  return { proxy, url: target.href };
}
