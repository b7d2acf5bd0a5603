#!/usr/bin/env node
// Runs `vitest run` for the package in the current folder and watches that it makes progress.
//
// Why: the Workers adapter's tests run inside workerd, and workerd 1.20260426 can livelock in
// V8's garbage collector. A V8 worker thread that needs memory waits for the main thread to
// collect garbage, while the main thread runs V8's incremental sweeping task in workerd's message
// pump, and that task posts itself again without end: the process spins at 100% CPU with no
// JavaScript running, so neither a test's timeout (which runs inside workerd) nor vitest ever ends
// the run. Seen in about one run in eight of the package's tests on a loaded two-core machine,
// each time after a test that moves states of tens of megabytes (gdb: the main thread in
// `cppgc::internal::Sweeper::SweeperImpl::IncrementalSweepTask::Run` under
// `v8::platform::DefaultPlatform::PumpMessageLoop`, called by workerd's `IoContext::runImpl`; a
// "V8 DefaultWorker" thread in `v8::internal::CollectionBarrier::AwaitCollectionBackground`).
//
// What it does: vitest prints each test file's result as it ends (one file takes seconds). When
// nothing is printed for STALL_MS, the run is stopped (vitest and its workerd, as one process
// group) and started once more, saying so. A run that ends, passing or failing, is never run
// again: the exit code is vitest's. A second stall fails with a message that says what happened.
//
// Usage (from a package's `test` script): node ../../tooling/scripts/vitest-watchdog.mjs [vitest args]
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const STALL_MS = Number(process.env.VITEST_STALL_MS) || 120_000;
const ATTEMPTS = 2;

const require = createRequire(join(process.cwd(), 'package.json'));
const vitest = join(dirname(require.resolve('vitest/package.json')), 'vitest.mjs');
const args = [vitest, 'run', ...process.argv.slice(2)];

/** @type {import('node:child_process').ChildProcess | undefined} */
let current;
const stopGroup = (signal) => {
  if (current?.pid === undefined) return;
  try {
    process.kill(-current.pid, signal);
  } catch {
    // The group is gone already.
  }
};
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) {
  process.on(signal, () => {
    stopGroup(signal);
    process.exit(130);
  });
}

/** One run of vitest: its exit code, or 'stalled' when it printed nothing for STALL_MS. */
function runOnce() {
  return new Promise((resolve) => {
    // Its own process group, so that a stall stops workerd (a child of vitest's pool) as well.
    const child = spawn(process.execPath, args, {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: process.stdout.isTTY && !process.env.NO_COLOR ? { ...process.env, FORCE_COLOR: '1' } : process.env,
    });
    current = child;
    let stalled = false;
    let timer = setTimeout(onStall, STALL_MS);
    function onStall() {
      stalled = true;
      stopGroup('SIGKILL');
    }
    const pass = (/** @type {NodeJS.WriteStream} */ out) => (/** @type {Buffer} */ chunk) => {
      out.write(chunk);
      clearTimeout(timer);
      if (!stalled) timer = setTimeout(onStall, STALL_MS);
    };
    child.stdout?.on('data', pass(process.stdout));
    child.stderr?.on('data', pass(process.stderr));
    // Whatever vitest left in its group (workerd) goes with it; the result comes once its output
    // has all been passed on.
    child.once('exit', () => stopGroup('SIGKILL'));
    child.once('close', (code) => {
      clearTimeout(timer);
      current = undefined;
      resolve(stalled ? 'stalled' : (code ?? 1));
    });
  });
}

for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
  const result = await runOnce();
  if (result !== 'stalled') process.exit(result);
  const seconds = Math.round(STALL_MS / 1000);
  if (attempt < ATTEMPTS) {
    console.error(
      `\nvitest-watchdog: nothing printed for ${seconds} s, so vitest and workerd were stopped (workerd can livelock in its garbage collector: see tooling/scripts/vitest-watchdog.mjs). Running the tests again (attempt ${attempt + 1} of ${ATTEMPTS}).\n`,
    );
  } else {
    console.error(`\nvitest-watchdog: nothing printed for ${seconds} s in the last run as well: failing.\n`);
    process.exit(1);
  }
}
