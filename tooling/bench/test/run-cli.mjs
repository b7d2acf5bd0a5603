// @ts-check
// Runs `pnpm bench` (src/cli.mjs) in a child process the way the tests need it: a clean
// environment plus `env`, its results in a fresh temporary folder, its output collected.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/**
 * @typedef {object} CliRun
 * @property {number | null} exitCode
 * @property {string} stdout
 * @property {string} stderr
 * @property {string} out the folder that holds results.json and results.md
 */

/**
 * Runs the bench with `BENCH_QUICK=1` and `env`; resolves when it exits.
 * @param {Record<string, string>} env
 * @returns {Promise<CliRun>}
 */
export async function runBenchCli(env) {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'org-bench-test-'));
  const child = spawn(process.execPath, ['src/cli.mjs'], {
    cwd: packageDir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', BENCH_QUICK: '1', ...env, OUT: out },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text) => (stderr += text));
  const exitCode = /** @type {number | null} */ (await new Promise((resolve) => child.once('close', resolve)));
  return { exitCode, stdout, stderr, out };
}
