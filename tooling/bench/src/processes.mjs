// @ts-check
// Child processes of the benchmark: each in its own process group with a clean environment, a
// time limit, and one place that stops whatever is still running when the benchmark ends.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folder of this package's source. */
export const SOURCE_DIR = path.dirname(fileURLToPath(import.meta.url));

/** @type {Set<import('node:child_process').ChildProcess>} */
const running = new Set();

/**
 * @typedef {object} Started
 * @property {import('node:child_process').ChildProcess} child
 * @property {() => string} stdout everything printed so far
 * @property {() => string} stderr the last few kilobytes of the error output
 * @property {Promise<{ code: number | null, signal: NodeJS.Signals | null, timedOut: boolean }>} exited
 */

/**
 * Starts `node <script>` from this package's source folder.
 * @param {string} script path relative to `src/`
 * @param {Record<string, string>} env the whole environment of the child (PATH and HOME are added)
 * @param {{ timeoutSeconds: number }} options
 * @returns {Started}
 */
export function startNode(script, env, options) {
  const child = spawn(process.execPath, [path.join(SOURCE_DIR, script)], {
    cwd: path.dirname(SOURCE_DIR),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (text) => (stdout += text));
  child.stderr?.setEncoding('utf8').on('data', (text) => (stderr = (stderr + text).slice(-4000)));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child, 'SIGKILL');
  }, options.timeoutSeconds * 1000);
  const exited = new Promise((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, timedOut });
    });
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited: /** @type {Started['exited']} */ (exited) };
}

/**
 * Resolves with the URL a child prints as `LISTENING <url>`.
 * @param {Started} started
 * @param {string} name for the error message
 * @returns {Promise<string>}
 */
export function listeningUrl(started, name) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 20 s: ${started.stderr()}`)), 20_000);
    const look = () => {
      const match = /LISTENING (\S+)/.exec(started.stdout());
      if (!match) return;
      clearTimeout(timer);
      started.child.stdout?.off('data', look);
      resolve(/** @type {string} */ (match[1]));
    };
    started.child.stdout?.on('data', look);
    void started.exited.then(() => reject(new Error(`${name} exited before listening: ${started.stderr()}`)));
    look();
  });
}

/**
 * @param {import('node:child_process').ChildProcess} child
 * @param {NodeJS.Signals} signal
 */
export function killGroup(child, signal) {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

/** Stops every child still running (on exit or interrupt). */
export function stopAll() {
  for (const child of running) killGroup(child, 'SIGKILL');
}
