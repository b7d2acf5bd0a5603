// @ts-check
// The shared-sessions scenario at a small size, as a test: two instances on a throwaway Redis,
// each session started on one and streamed from the other; every stream must hold exactly its own
// events, once each and in order. It needs redis-server (CI installs it) and asserts no timings.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBenchCli } from './run-cli.mjs';

const SESSIONS = 20;
let stdout = '';
let stderr = '';
let out = '';
let exitCode = /** @type {number | null} */ (null);

beforeAll(async () => {
  ({ stdout, stderr, out, exitCode } = await runBenchCli({
    ...(process.env.REDIS_SERVER ? { REDIS_SERVER: process.env.REDIS_SERVER } : {}),
    BENCH_SCENARIOS: 'shared-sessions',
    BENCH_SESSIONS: String(SESSIONS),
  }));
}, 300_000);

afterAll(() => {
  if (out) fs.rmSync(out, { recursive: true, force: true });
});

describe('the shared-sessions scenario with 20 sessions', () => {
  it('runs on a real Redis and finds every stream exact', () => {
    expect(exitCode, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).not.toContain('Skipped');
    expect(stdout).not.toContain('Problems');
    expect(stdout).toContain(`### Sessions across two instances on one Redis (${SESSIONS} sessions`);
    expect(stdout).toMatch(/\| events lost, repeated, out of order or misrouted \| 0 \|/);
  });

  it('reports what it checked in results.json: every session, each with its thoughts, nothing lost, repeated or misrouted', () => {
    const results = JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8'));
    expect(results.samples).toHaveLength(1);
    const [sample] = results.samples;
    expect(sample.problems).toEqual([]);
    expect(sample.skipped).toBeUndefined();
    expect(sample.figures).toMatchObject({
      sessions: SESSIONS,
      lost: 0,
      duplicated: 0,
      misrouted: 0,
      outOfOrder: 0,
      thoughtMismatches: 0,
      unfinished: 0,
      replayMismatches: 0,
      ranElsewhere: 0,
    });
    // Ten thoughts and the complete event at least, per session.
    expect(sample.figures.events).toBeGreaterThanOrEqual(SESSIONS * 11);
  });
});
