// @ts-check
// The quick benchmark as a smoke test: it must run end to end (mock, floor, our runtime in
// process, in process without HTTP, served over HTTP, the SSE path and its floor, prefix caching,
// resumes, and sessions across two instances on one Redis), print every row of every table with
// figures, and see every replayed thought signature intact.
// It asserts no timings.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBenchCli } from './run-cli.mjs';

let stdout = '';
let stderr = '';
let out = '';
let exitCode = /** @type {number | null} */ (null);

beforeAll(async () => {
  ({ stdout, stderr, out, exitCode } = await runBenchCli({}));
}, 300_000);

afterAll(() => {
  if (out) fs.rmSync(out, { recursive: true, force: true });
});

/**
 * The body rows of the markdown table under `heading`, as arrays of cells.
 * @param {string} heading
 */
function tableUnder(heading) {
  const start = stdout.indexOf(heading);
  expect(start, `no section "${heading}" in:\n${stdout}\n${stderr}`).toBeGreaterThanOrEqual(0);
  const lines = stdout.slice(start).split('\n').slice(1);
  const first = lines.findIndex((line) => line.startsWith('|'));
  const rows = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.slice(1, -1).split('|').map((cell) => cell.trim()));
  }
  return rows;
}

/** A measured figure: a number with its unit, and the range when there were repetitions. */
const FIGURE = /^\d+(\.\d+)? ?(ms|s|MB|KiB|µs|k|×)( \(\d+(\.\d+)?–\d+(\.\d+)?\))?$/;
/** Signature violations: none of the checked calls lost its signature. */
const NO_VIOLATIONS = /^0 \/ [1-9]\d*$/;

/**
 * @param {string[][]} rows
 * @param {string} label
 */
function row(rows, label) {
  const found = rows.find((cells) => cells[0] === label);
  expect(found, `no row "${label}" in ${JSON.stringify(rows)}`).toBeDefined();
  return /** @type {string[]} */ (found);
}

describe('pnpm bench in quick mode', () => {
  it('finishes without problems', () => {
    expect(stderr).not.toContain('PROBLEM');
    expect(stdout).not.toContain('Problems');
    expect(exitCode, stderr).toBe(0);
  });

  it('compares our runtime with the floor on every figure of the five-turn loop', () => {
    const rows = tableUnder('### Five-turn tool loop');
    for (const label of [
      'CPU per 5-turn run',
      'wall time per 5-turn run',
      'start-up CPU (process start + first run), importing @org/adapter-node',
      'start-up CPU (process start + first run), core only (global fetch)',
      'peak RSS after 20 runs',
      'peak RSS after one run',
    ]) {
      const [, floor, ours, ratio] = row(rows, label);
      expect([floor, ours, ratio]).toEqual([expect.stringMatching(FIGURE), expect.stringMatching(FIGURE), expect.stringMatching(FIGURE)]);
    }
    const [, floor, ours] = row(rows, 'signature violations');
    expect([floor, ours]).toEqual([expect.stringMatching(NO_VIOLATIONS), expect.stringMatching(NO_VIOLATIONS)]);
  });

  it('gives CPU per turn at 5, 50 and 200 turns (quick mode), over the mock and in process', () => {
    const rows = tableUnder('### CPU per model turn');
    expect(rows.map((cells) => cells[0])).toEqual(['5', '50', '200']);
    for (const [, runs, ...figures] of rows) {
      expect(Number(runs)).toBeGreaterThanOrEqual(2);
      const violations = figures.pop();
      expect(violations).toMatch(NO_VIOLATIONS);
      for (const figure of figures) expect(figure).toMatch(FIGURE);
    }
  });

  it('gives the cost of serving over HTTP next to run() in process', () => {
    const rows = tableUnder('### Serving over HTTP');
    for (const label of ['CPU per 5-turn run', 'start-up CPU (process start + first run)', 'peak RSS after 20 runs']) {
      const [, inProcess, served, ratio] = row(rows, label);
      expect([inProcess, served, ratio]).toEqual([
        expect.stringMatching(FIGURE),
        expect.stringMatching(FIGURE),
        expect.stringMatching(FIGURE),
      ]);
    }
    const [, inProcess, served] = row(rows, 'signature violations');
    expect([inProcess, served]).toEqual([expect.stringMatching(NO_VIOLATIONS), expect.stringMatching(NO_VIOLATIONS)]);
  });

  it('gives SSE events per core-second through the handler, the batched event stream and a library-free floor', () => {
    const rows = tableUnder('### SSE events per second of server CPU');
    for (const label of ['thousand events per core-second, warm server', 'thousand events per core-second, from the second run', 'server CPU per event, warm server']) {
      const cells = row(rows, label).slice(1);
      expect(cells).toEqual(Array.from({ length: 5 }, () => expect.stringMatching(FIGURE)));
    }
  });

  it('gives the bytes per model request with and without prefix caching, every request naming the cache when it is on', () => {
    const rows = tableUnder('### Bytes per model request');
    const [, whole, cached, ratio] = row(rows, 'KiB per model request (5-turn runs)');
    expect([whole, cached, ratio]).toEqual([expect.stringMatching(FIGURE), expect.stringMatching(FIGURE), expect.stringMatching(FIGURE)]);
    expect(row(rows, 'share of requests naming a cached prefix').slice(1, 3)).toEqual(['0×', '1.00×']);
  });

  it('gives the CPU of a resume before its first event and its latency under an open-loop arrival rate', () => {
    const rows = tableUnder('### Resuming suspended runs');
    expect(rows).toHaveLength(4);
    for (const [, figure] of rows) expect(figure).toMatch(FIGURE);
  });

  it('checks sessions across two instances on one Redis: nothing lost, repeated or misrouted', () => {
    const rows = tableUnder('### Sessions across two instances on one Redis');
    for (const label of ['sessions per second (wall time)', 'append → delivery on the other instance, p99']) expect(row(rows, label)[1]).toMatch(/^\d+(\.\d+)?( ms)?$/);
    expect(row(rows, 'events lost, repeated, out of order or misrouted')[1]).toBe('0');
  });

  it('keeps every sample in results.json', () => {
    const results = JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8'));
    expect(results.samples.length).toBe(21);
    for (const sample of results.samples) {
      expect(sample.problems).toEqual([]);
      if (sample.id.startsWith('ours/') || sample.id.startsWith('floor/') || sample.id.startsWith('ours-server/')) {
        expect(sample.requests).toBe(sample.turns * sample.runs);
      }
    }
  });
});
