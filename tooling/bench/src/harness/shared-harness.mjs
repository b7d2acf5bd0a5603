// @ts-check
// Runs an external agent-loop harness (the folder BENCH_HARNESS names, with its own mock, floor
// and peer-library contenders) with our runtime added as the contender `ours`. The harness is
// copied to a temporary folder, so the original stays untouched; its installed dependencies are
// linked in, and without them only its floor and ours run.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * @param {{ harness: string, runs: number, reps: number, out: string }} options
 * @returns {Promise<number>} the harness's exit code
 */
export async function runSharedHarness(options) {
  const harness = path.resolve(options.harness);
  if (!fs.existsSync(path.join(harness, 'run.mjs'))) {
    process.stderr.write(`No benchmark harness at ${harness} (BENCH_HARNESS must name a folder with run.mjs).\n`);
    return 1;
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'org-bench-harness-'));
  try {
    fs.cpSync(harness, work, {
      recursive: true,
      filter: (source) => !/[/\\](results[^/\\]*|\.node|node_modules)$/.test(source),
    });
    makeWritable(work);
    const installed = fs.existsSync(path.join(harness, 'node_modules'));
    for (const linked of ['node_modules', '.node']) {
      if (fs.existsSync(path.join(harness, linked))) fs.symlinkSync(path.join(harness, linked), path.join(work, linked));
    }
    fs.copyFileSync(path.join(here, 'ours-contender.mjs'), path.join(work, 'contenders', 'ours.mjs'));
    const contenders = process.env.CONTENDERS ?? (installed ? undefined : 'floor,ours');
    if (!installed) process.stderr.write(`${harness} has no node_modules (npm ci there): running its floor and ours only.\n`);
    const distOf = (/** @type {string} */ specifier) => path.dirname(fileURLToPath(import.meta.resolve(specifier)));
    const child = spawn(process.execPath, ['run.mjs'], {
      cwd: work,
      stdio: 'inherit',
      env: {
        ...process.env,
        NODE_BIN: process.env.NODE_BIN ?? process.execPath,
        ...(contenders ? { CONTENDERS: contenders } : {}),
        N: String(options.runs),
        REPS: String(options.reps),
        OUT: path.resolve(options.out),
        BENCH_CORE_DIST: distOf('@org/core'),
        BENCH_ADAPTER_NODE_DIST: distOf('@org/adapter-node'),
      },
    });
    return await new Promise((resolve) => child.once('close', (code) => resolve(code ?? 1)));
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The copy keeps the original's modes; a read-only harness would leave a copy that cannot be
 * extended or removed.
 * @param {string} folder
 */
function makeWritable(folder) {
  fs.chmodSync(folder, 0o755);
  for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) makeWritable(full);
    else if (entry.isFile()) fs.chmodSync(full, 0o644);
  }
}
