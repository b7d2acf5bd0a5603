import { rm } from 'node:fs/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';

/** A server process that dies with the test process, however that one ends. */
export interface GuardedProcess {
  /** The last few kilobytes the server printed, for failure messages. */
  output(): string;
  /** Resolves when the server has exited (by itself or by {@link GuardedProcess.stop}). */
  exited: Promise<number | null>;
  /** Stops the server (its stop signal; SIGINT after 5 s; SIGKILL after 10 s) and waits for it. */
  stop(): Promise<void>;
}

// The server runs under a small shell that holds our stdin: when this process ends in any way the
// pipe closes, `cat` returns and the server is interrupted, so no test run leaves a server behind.
// Background jobs of a script read /dev/null, hence the copy of stdin on descriptor 3.
const guard = (signal: string) =>
  [
    'exec 3<&0',
    '"$0" "$@" </dev/null &',
    'server=$!',
    `( cat <&3 >/dev/null; kill -${signal} "$server" 2>/dev/null ) &`,
    'echo "guarded-pid:$server"',
    'wait "$server"',
  ].join('\n');

/** Starts `command` under the guard, optionally as another user (`uid`/`gid`, when root). */
export function startGuardedProcess(
  command: string,
  args: readonly string[],
  options: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv; cwd?: string; stopSignal?: 'INT' | 'TERM' } = {},
): GuardedProcess {
  const child: ChildProcess = spawn('/bin/sh', ['-c', guard(options.stopSignal ?? 'INT'), command, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: options.env ?? process.env,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    ...(options.uid === undefined ? {} : { uid: options.uid }),
    ...(options.gid === undefined ? {} : { gid: options.gid }),
  });
  let printed = '';
  let serverPid: number | undefined;
  const keep = (chunk: Buffer) => {
    printed = (printed + chunk.toString('utf8')).slice(-6_000);
    serverPid ??= Number(/guarded-pid:(\d+)/.exec(printed)?.[1]) || undefined;
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', (error) => {
      printed += `\n${error.message}`;
      resolve(null);
    });
  });
  return {
    output: () => printed.replace(/guarded-pid:\d+\n?/, ''),
    exited,
    async stop() {
      child.stdin?.end();
      const signal = (name: NodeJS.Signals) => {
        try {
          if (serverPid) process.kill(serverPid, name);
        } catch {
          // Gone already.
        }
      };
      const timers = [setTimeout(() => signal('SIGINT'), 5_000), setTimeout(() => (signal('SIGKILL'), child.kill('SIGKILL')), 10_000)];
      await exited;
      for (const timer of timers) clearTimeout(timer);
    },
  };
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Calls `probe` until it succeeds, the server exits, or `timeoutMs` passes. */
export async function waitUntilReady(server: GuardedProcess, probe: () => Promise<void>, what: string, timeoutMs = 30_000): Promise<void> {
  let exitCode: number | null | undefined;
  void server.exited.then((code) => {
    exitCode = code;
  });
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    if (exitCode !== undefined) throw new Error(`${what} exited (code ${exitCode}) before accepting connections:\n${server.output()}`);
    try {
      await probe();
      return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`${what} did not accept connections within ${timeoutMs} ms (${(lastError as Error)?.message}):\n${server.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A throwaway server a test started: where it listens, and how to stop it and remove its folder. */
export interface ThrowawayServer {
  url: string;
  password: string;
  port: number;
  /** Stops the server and removes its folder. */
  stop(): Promise<void>;
}

/**
 * Starts a server on a free port and waits until `probe` gets through to it; tries three ports in
 * case another process takes the chosen one first. The folder is removed when the server stops,
 * or at once when no attempt succeeds.
 */
export async function startOnFreePort(options: {
  directory: string;
  password: string;
  what: string;
  launch: (port: number) => { server: GuardedProcess; url: string };
  probe: (url: string) => Promise<void>;
}): Promise<ThrowawayServer> {
  const { directory, password } = options;
  let failure: unknown;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = await freePort();
    const { server, url } = options.launch(port);
    try {
      await waitUntilReady(server, () => options.probe(url), options.what);
    } catch (error) {
      failure = error;
      await server.stop();
      continue;
    }
    return {
      url,
      password,
      port,
      async stop() {
        await server.stop();
        await rm(directory, { recursive: true, force: true });
      },
    };
  }
  await rm(directory, { recursive: true, force: true });
  throw failure;
}
