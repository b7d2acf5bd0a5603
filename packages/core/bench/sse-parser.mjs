// `node bench/sse-parser.mjs` (after `pnpm build`): how the SSE parser's time grows with the length
// of one line. One `data:` line of 1, 4, 16 and 64 MiB arrives in 64 KiB chunks, as a large model
// chunk (an inline image) does; a parser that is linear in its input takes about 16 times as long
// for 64 MiB as for 4 MiB, one that rescans what it buffered takes about 256 times as long.
import { createSseParser } from '../dist/index.js';

const CHUNK = 64 * 1024;
const REPS = Number(process.env.REPS ?? 5);

function lineOf(mebibytes) {
  return new TextEncoder().encode(`data: ${'x'.repeat(mebibytes * 1024 * 1024)}\n\n`);
}

function parseOnce(bytes) {
  let length = 0;
  const parser = createSseParser((event) => (length += event.data.length));
  const started = performance.now();
  for (let offset = 0; offset < bytes.length; offset += CHUNK) parser.push(bytes.subarray(offset, offset + CHUNK));
  parser.end();
  const elapsed = performance.now() - started;
  if (length !== bytes.length - 8) throw new Error(`parsed ${length} characters of ${bytes.length - 8}`);
  return elapsed;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const results = {};
for (const mebibytes of [1, 4, 16, 64]) {
  const bytes = lineOf(mebibytes);
  parseOnce(bytes); // warm-up
  const times = Array.from({ length: REPS }, () => parseOnce(bytes));
  results[mebibytes] = median(times);
  console.log(`${String(mebibytes).padStart(3)} MiB line: ${results[mebibytes].toFixed(1).padStart(8)} ms  (${(results[mebibytes] / mebibytes).toFixed(2)} ms/MiB)`);
}
console.log(`64 MiB / 4 MiB time: ${(results[64] / results[4]).toFixed(1)}x for 16x the input (linear: ~16x, quadratic: ~256x)`);
