// @ts-check
// A throwaway redis-server for the shared-sessions scenario: a free loopback port, a random
// password, no persistence, a temporary folder. It runs in the caller's process group, so
// stopping that group stops it too.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The redis-server binary: REDIS_SERVER, else the first on PATH or in the usual places; undefined when none. */
export function findRedisServer() {
  const onPath = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean).map((folder) => path.join(folder, 'redis-server'));
  const candidates = [process.env.REDIS_SERVER, ...onPath, '/usr/bin/redis-server', '/usr/local/bin/redis-server', '/opt/homebrew/bin/redis-server'];
  return candidates.find((candidate) => candidate && fs.existsSync(candidate));
}

/** @returns {Promise<number>} */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * Sends AUTH and PING over a fresh connection; resolves when the server answers PONG.
 * @param {number} port
 * @param {string} password
 * @returns {Promise<void>}
 */
function ping(port, password) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    const timer = setTimeout(() => socket.destroy(new Error('no answer')), 1_000);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`AUTH ${password}\r\nPING\r\n`));
    socket.on('data', (text) => {
      reply += text;
      if (reply.includes('+PONG')) {
        clearTimeout(timer);
        socket.end();
        resolve();
      }
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/**
 * Starts redis-server and waits until it answers.
 * @param {string} binary
 * @returns {Promise<{ url: string, stop(): Promise<void> }>}
 */
export async function startRedisServer(binary) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'org-bench-redis-'));
  const password = randomUUID();
  const port = await freePort();
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', password, '--save', '', '--appendonly', 'no', '--dir', folder], {
    cwd: folder,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let errors = '';
  child.stderr?.setEncoding('utf8').on('data', (text) => (errors = (errors + text).slice(-2000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(folder, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`redis-server exited with ${child.exitCode}: ${errors}`);
    }
    try {
      await ping(port, password);
      return { url: `redis://:${password}@127.0.0.1:${port}`, stop };
    } catch (error) {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`redis-server did not answer within 20 s (${/** @type {Error} */ (error).message}): ${errors}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
