import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, startDevProcess, startRedisServer } from './test-support/dev-process.js';

const children: ChildProcess[] = [];
let storeDirectory = '';

afterAll(async () => {
  for (const child of children) child.kill('SIGTERM');
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

function startProcess(env: Record<string, string>): Promise<{ url: string; banner: string }> {
  return startDevProcess(env, children);
}

async function events(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

const post = (url: string, body: unknown) =>
  fetch(`${url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('dev server process', () => {
  it('runs against the simulated Gemini: suspend on one process, resume on another sharing the store', async () => {
    storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'org-dev-store-'));
    const first = await startProcess({ INTERACTION_STORE_DIR: storeDirectory });
    expect(first.banner).toMatch(/SIMULATED Gemini at http:\/\/127\.0\.0\.1:\d+\/v1beta /);
    expect(first.banner).not.toContain(storeDirectory);
    expect(first.banner).toContain('curl -N');
    const started = await events(await post(first.url, { start: { segments: [{ textSegment: { text: 'Ask me my name and greet me.' } }] } }));
    expect(started.map((event) => Object.keys(event)[0])).toContain('thought');
    const suspend = started.at(-1)?.waitForInput;
    expect(suspend?.interactionId).toEqual(expect.any(String));

    const second = await startProcess({ INTERACTION_STORE_DIR: storeDirectory });
    const resumed = await events(
      await post(second.url, { resume: { interactionId: suspend?.interactionId, response: { input: { role: 'user', parts: [{ text: 'Ada' }] } } } }),
    );
    expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
    expect(JSON.stringify(resumed.at(-1))).toContain('Hello, Ada!');

    const reused = await events(await post(first.url, { resume: { interactionId: suspend?.interactionId, response: {} } }));
    expect(reused).toEqual([{ error: { message: `Unknown interaction ID: ${suspend?.interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);

    const unknown = await events(await post(first.url, { resume: { interactionId: 'no-such-run', response: {} } }));
    expect(unknown).toEqual([{ error: { message: 'Unknown interaction ID: no-such-run', code: 'INTERACTION_NOT_FOUND' } }]);

    const oversized = await fetch(`${first.url}/v1beta1/streamRunAgent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ segments: [{ type: 'text', text: 'x'.repeat(33 * 1024 * 1024) }] }),
    });
    expect(oversized.status).toBe(413);
    expect(((await oversized.json()) as { error: { code: string } }).error.code).toBe('PAYLOAD_TOO_LARGE');

    const malformed = await fetch(`${first.url}/v1beta1/streamRunAgent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ start: { segments: 'nope' } }),
    });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { message: string } }).error.message).toMatch(/^start\.segments: /);

    // The Opal client asks for SSE and shows only the status line of a non-2xx answer: it gets an event.
    const empty = await post(first.url, { start: { segments: [] } });
    expect(empty.status).toBe(200);
    expect(await events(empty)).toEqual([{ error: { message: "start.segments: empty: Missing 'segments' in request body", code: 'BAD_REQUEST' } }]);
  });
});

/** The status of a GET that names `host` in its `Host` header, as a page on a re-pointed domain would. */
function statusFor(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${url}/`, { headers: { host } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
  });
}

describe('dev server process: hosts', () => {
  it('with a CORS origin list, serves only localhost, IP addresses and ALLOWED_HOSTS, and says so', async () => {
    const { url, banner } = await startProcess({ CORS_ORIGINS: 'https://app.example.test', ALLOWED_HOSTS: 'agent.example.test' });
    const port = new URL(url).port;
    expect(banner).toContain('Hosts:     only requests for localhost, an IP address, agent.example.test are served');
    expect(await statusFor(url, `localhost:${port}`)).toBe(200);
    expect(await statusFor(url, `127.0.0.1:${port}`)).toBe(200);
    expect(await statusFor(url, `agent.example.test:${port}`)).toBe(200);
    expect(await statusFor(url, `rebound.example:${port}`)).toBe(403);
    // Any origin may call by default, so any host is served.
    const open = await startProcess({});
    expect(open.banner).not.toContain('Hosts:');
    expect(await statusFor(open.url, 'rebound.example')).toBe(200);
  });
});

describe('dev server process: start and stop', () => {
  it('prints the simulated Gemini URL, which answers like Gemini', async () => {
    const { banner } = await startProcess({});
    const simulated = /SIMULATED Gemini at (\S+) /.exec(banner)?.[1] as string;
    const response = await fetch(`${simulated}/models/gemini-2.5-flash:streamGenerateContent?alt=sse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': 'any' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] }),
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('data: ');
  });

  it('says a busy port is busy and suggests --port, without a stack trace', async () => {
    const { url } = await startProcess({});
    const port = new URL(url).port;
    const result = await runToExit(['--port', port], {});
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(`Port ${port} is already in use (another dev server?). Start on another one with --port <n>, e.g. pnpm dev --port ${Number(port) + 1}.`);
  });

  it('stops on Ctrl-C with exit code 0 and nothing on stderr', async () => {
    const child = spawn(process.execPath, [cli, '--port', '0'], { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await new Promise<void>((resolve) => child.stdout?.on('data', () => stdout.includes('curl') && resolve()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
    expect(stdout).toContain('Stopping the dev server.');
  });
});

describe('dev server process: settings it cannot use', () => {
  // Each is refused at start with one line naming the setting, never later as a failure of every run.
  it('refuses --port without a value or a port that is not a plain number, and names arguments it ignores', async () => {
    for (const args of [['--port'], ['--port', '1e3'], ['--port', '0x1f'], ['--port=']]) {
      const result = await runToExit(args, {});
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toMatch(/^--port \/ PORT must be an integer between 0 and 65535, got "[^"]*"\n$/);
    }
    // A flag it does not know is named, and the server still starts (stopped here once it did).
    const unknown = await runToExit(['--port', '0', '-p'], {});
    expect(unknown.code).toBe(0);
    expect(unknown.stderr).toBe('Ignoring the argument "-p": the dev server takes only --port <n>; every other setting is an environment variable (see the README).\n');
    const help = await runToExit(['--help'], {});
    expect(help).toEqual({ code: 0, stderr: '' });
  });

  it('says a busy SIMULATED_GEMINI_PORT is busy, naming it rather than --port', async () => {
    const busy = await listenOnFreePort();
    try {
      const result = await runToExit(['--port', '0'], { SIMULATED_GEMINI_PORT: String(busy.port) });
      expect(result.code).toBe(1);
      expect(result.stderr.trim()).toBe(
        `The dev server could not start: SIMULATED_GEMINI_PORT ${busy.port} is already in use; choose another port, or leave it unset for a free one.`,
      );
    } finally {
      busy.server.close();
    }
  });

  it('refuses a Redis or PostgreSQL it cannot reach or log in to, without printing the password', async () => {
    const nothing = await listenOnFreePort();
    nothing.server.close();
    const unreachable = await runToExit(['--port', '0'], { REDIS_URL: `redis://:redis-secret@127.0.0.1:${nothing.port}` });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/^The dev server could not start: REDIS_URL: .*\(redis: ECONNREFUSED\)[^\n]*\n$/);
    const postgres = await runToExit(['--port', '0'], { DATABASE_URL: `postgres://agent:postgres-secret@127.0.0.1:${nothing.port}/agent` });
    expect(postgres.code).toBe(1);
    expect(postgres.stderr).toMatch(/^The dev server could not start: DATABASE_URL: .*\(postgres: ECONNREFUSED\)[^\n]*\n$/);
    expect(postgres.stderr).not.toContain('postgres-secret');

    const redis = await startRedisServer();
    try {
      const wrongPassword = await runToExit(['--port', '0'], { REDIS_URL: redis.url.replace(/:[^:@/]+@/, ':wrong-secret@') });
      expect(wrongPassword.code).toBe(1);
      expect(wrongPassword.stderr).toMatch(/^The dev server could not start: REDIS_URL: .*\(redis: WRONGPASS\)[^\n]*\n$/);
      expect(wrongPassword.stderr).not.toContain('wrong-secret');
    } finally {
      await redis.stop();
    }
  }, 60_000);

  it('refuses an INTERACTION_STORE_DIR it cannot keep runs in', async () => {
    const parent = await mkdtemp(path.join(os.tmpdir(), 'org-dev-unusable-'));
    try {
      // Sessions are kept in a "sessions" folder inside it; a file of that name makes it unusable.
      await mkdir(path.join(parent, 'store'));
      await writeFile(path.join(parent, 'store', 'sessions'), '');
      const result = await runToExit(['--port', '0'], { INTERACTION_STORE_DIR: path.join(parent, 'store') });
      expect(result.code).toBe(1);
      expect(result.stderr).toBe('The dev server could not start: INTERACTION_STORE_DIR cannot hold runs and sessions (EEXIST); choose a folder you can write to.\n');
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
  });

  it('refuses CORS_ORIGINS and ALLOWED_HOSTS entries no request could ever match, and takes an origin copied with its trailing slash', async () => {
    for (const origins of ['app.example.test', 'https://app.example.test/path', '*, https://app.example.test', ' , ']) {
      const result = await runToExit(['--port', '0'], { CORS_ORIGINS: origins });
      expect(result.code, origins).toBe(2);
      expect(result.stderr).toMatch(/^CORS_ORIGINS: .*e\.g\. https:\/\/app\.example\.com[^\n]*\n$/);
    }
    for (const hosts of ['dev.example.test:8080', 'https://dev.example.test']) {
      const result = await runToExit(['--port', '0'], { CORS_ORIGINS: 'https://app.example.test', ALLOWED_HOSTS: hosts });
      expect(result.code, hosts).toBe(2);
      expect(result.stderr).toBe(`ALLOWED_HOSTS: "${hosts}" is not a host name; write names without scheme or port, e.g. dev.example.test (or .example.test for its subdomains).\n`);
    }
    const { url, banner } = await startProcess({ CORS_ORIGINS: 'https://App.Example.test/', ALLOWED_HOSTS: 'dev.example.test' });
    expect(banner).toContain('Browsers:  pages from https://app.example.test may call this server');
    const preflight = await fetch(`${url}/v1beta1/streamRunAgent`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example.test', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example.test');
  });
});

/** A server listening on a free loopback port, to make that port busy (or, closed, to find one nothing listens on). */
async function listenOnFreePort(): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as net.AddressInfo).port };
}

function runToExit(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [cli, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // A start that should have been refused succeeds: stop it, so the test fails on its exit code.
  child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('curl') && child.kill('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
}
