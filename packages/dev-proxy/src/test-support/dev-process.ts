// Test-only helpers: start the built dev server as a real process, the way `pnpm dev` does.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The built CLI, as `pnpm dev` runs it. */
export const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/cli.js');

/** Starts `dist/cli.js` on a free port; resolves with its URL and banner once it is listening. */
export function startDevProcess(env: Record<string, string>, children: ChildProcess[]): Promise<{ url: string; banner: string }> {
  const child = spawn(process.execPath, [cli, '--port', '0'], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Agent dev server on (http:\/\/\S+)/.exec(output);
      if (match && output.includes('curl')) resolve({ url: match[1] as string, banner: output });
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => reject(new Error(`dev server exited with ${code}: ${output}`)));
  });
}

/** Stops a process with `signal` (SIGKILL after 10 s if it is still there) and waits for it to exit. */
export async function stopProcess(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const forced = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(forced);
}

// Throwaway Redis and PostgreSQL servers on free loopback ports, the same helpers the store tests
// of adapter-node use (not part of any package's exports).
export { startRedisServer, type TestRedisServer } from '../../../adapter-node/src/test-support/start-redis-server.js';
export { startPostgresServer, type TestPostgresServer } from '../../../adapter-node/src/test-support/start-postgres-server.js';
