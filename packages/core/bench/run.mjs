// `pnpm bench`: runs the shared agent-loop benchmark harness with this package as a contender.
// The harness lives outside the repository (BENCH_HARNESS, default ../../../shared/bench); it is
// copied to a temporary folder with our contender added, so the original stays untouched.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const harness = path.resolve(process.env.BENCH_HARNESS ?? path.join(here, '../../../../shared/bench'));
if (!fs.existsSync(path.join(harness, 'run.mjs'))) {
  console.error(`Benchmark harness not found at ${harness}; set BENCH_HARNESS to its folder.`);
  process.exit(1);
}
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'org-bench-'));
fs.cpSync(harness, work, {
  recursive: true,
  filter: (source) => !/\/(results[^/]*|\.node|node_modules)$/.test(source),
});
for (const linked of ['node_modules', '.node']) {
  if (fs.existsSync(path.join(harness, linked))) fs.symlinkSync(path.join(harness, linked), path.join(work, linked));
}
fs.copyFileSync(path.join(here, 'ours.mjs'), path.join(work, 'contenders', 'ours.mjs'));
const out = path.resolve(process.env.OUT ?? path.join(here, 'results'));
const result = spawnSync(process.execPath, ['run.mjs'], {
  cwd: work,
  stdio: 'inherit',
  env: {
    ...process.env,
    NODE_BIN: process.env.NODE_BIN ?? process.execPath,
    CONTENDERS: process.env.CONTENDERS ?? 'floor,ours',
    N: process.env.N ?? '200',
    REPS: process.env.REPS ?? '3',
    OUT: out,
    BENCH_CORE_DIST: path.join(here, '..', 'dist'),
  },
});
fs.rmSync(work, { recursive: true, force: true });
process.exit(result.status ?? 1);
