import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createClient } from 'redis';
import { startGuardedProcess, startOnFreePort, type ThrowawayServer } from './guarded-process.js';

/** A throwaway Redis server for tests. */
export interface TestRedisServer extends ThrowawayServer {
  /** `redis://:<password>@127.0.0.1:<port>`. */
  url: string;
}

const INSTALL_HINT = 'install it with `apt-get install redis-server` (.ci/run does), or set REDIS_SERVER to its path';

function findRedisServer(): string {
  const candidates = [process.env.REDIS_SERVER, '/usr/bin/redis-server', '/usr/local/bin/redis-server', '/opt/homebrew/bin/redis-server'];
  const found = candidates.find((candidate) => candidate && existsSync(candidate));
  if (!found) throw new Error(`The Redis tests start their own redis-server, and none was found: ${INSTALL_HINT}.`);
  return found;
}

/**
 * Starts `redis-server` on a free loopback port with a password, no persistence and a throwaway
 * folder; it stops with the test process even if that one is killed.
 */
export async function startRedisServer(): Promise<TestRedisServer> {
  const binary = findRedisServer();
  const directory = await mkdtemp(path.join(os.tmpdir(), 'org-redis-test-'));
  const password = randomUUID();
  return startOnFreePort({
    directory,
    password,
    what: 'redis-server',
    launch: (port) => ({
      server: startGuardedProcess(
        binary,
        ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', password, '--save', '', '--appendonly', 'no', '--dir', directory],
        { cwd: directory },
      ),
      url: `redis://:${password}@127.0.0.1:${port}`,
    }),
    probe: async (url) => {
      const client = createClient({ url, socket: { reconnectStrategy: false, connectTimeout: 1_000 } });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.ping();
      } finally {
        await client.close();
      }
    },
  });
}
