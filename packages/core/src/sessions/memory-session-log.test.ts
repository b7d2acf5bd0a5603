import { describe, expect, it } from 'vitest';
import { createMemorySessionLog } from './memory-session-log.js';

const event = (size: number) => `{"thought":{"text":"${'x'.repeat(size - 24)}"}}`;

describe('memory session log bounds', () => {
  it('makes room past its character budget: ended sessions first, then waiting ones, never a running one', async () => {
    const log = createMemorySessionLog({ maxChars: 1000 });
    for (const id of ['ended', 'waiting', 'running', 'newer-ended']) await log.create(id, { interactionId: `i-${id}` });
    await log.append('ended', [event(300)]);
    await log.update('ended', { status: 'completed' });
    await log.append('waiting', [event(300)]);
    await log.update('waiting', { status: 'suspended', interactionId: 'i1' });
    await log.append('newer-ended', [event(100)]);
    await log.update('newer-ended', { status: 'failed' });
    await log.append('running', [event(200)]);
    expect(await log.get('ended')).toMatchObject({ status: 'completed', eventCount: 1 });

    // 1,100 characters: the ended session written longest ago gives way, the newer ended one stays.
    await log.append('running', [event(200)]);
    expect(await log.get('ended')).toBeUndefined();
    expect(await log.get('newer-ended')).toMatchObject({ status: 'failed', eventCount: 1 });
    expect(await log.get('waiting')).toMatchObject({ status: 'suspended', eventCount: 1 });

    // The running session grows on: every other session goes, and it keeps every event.
    await log.append('running', [event(600)]);
    expect(await log.get('newer-ended')).toBeUndefined();
    expect(await log.get('waiting')).toBeUndefined();
    expect(await log.read('running', -1, 10)).toEqual([event(200), event(200), event(600)]);
  });

  it('sweeps sessions past their time to live as others are written', async () => {
    let clock = 0;
    const log = createMemorySessionLog({ ttlMs: 1000, maxChars: 10_000, now: () => clock });
    await log.create('old', { interactionId: 'i-old' });
    await log.append('old', [event(3000)]);
    await log.update('old', { status: 'suspended', interactionId: 'i1' });
    clock = 2000;
    await log.create('new', { interactionId: 'i-new' });
    // The expired session no longer counts against the budget: these fit without evicting anything else.
    await log.create('other', { interactionId: 'i-other' });
    await log.append('other', [event(4000)]);
    await log.update('other', { status: 'completed' });
    await log.append('new', [event(4000)]);
    expect(await log.get('other')).toMatchObject({ eventCount: 1 });
    expect(await log.get('old')).toBeUndefined();
  });
});

describe('memory session log reads', () => {
  it('reads events back one by one from any cursor, whatever batches they were appended in', async () => {
    const log = createMemorySessionLog();
    await log.create('s', { interactionId: 'i-s' });
    // Batches of one, many, none and many again; texts of every length, the empty one included.
    const texts = ['{"a":0}', '', '{"b":"line\\nbreak"}', 'ü€😀', '{"c":3}', 'x', '{"d":[1,2]}', '{"e":{}}'];
    expect(await log.append('s', [texts[0] as string])).toBe(0);
    expect(await log.append('s', texts.slice(1, 5))).toBe(1);
    expect(await log.append('s', [])).toBe(5);
    expect(await log.append('s', texts.slice(5))).toBe(5);
    expect(await log.get('s')).toMatchObject({ eventCount: texts.length });
    for (let after = -1; after <= texts.length; after += 1) {
      for (const limit of [0, 1, 2, 3, 100]) {
        expect(await log.read('s', after, limit), `after ${after}, limit ${limit}`).toEqual(texts.slice(after + 1, after + 1 + limit));
      }
    }
  });
});
