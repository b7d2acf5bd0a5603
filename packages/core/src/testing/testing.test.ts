import { describe, expect, it } from 'vitest';
import type { InteractionStore } from '../ports/index.js';
import { describeInteractionStoreConformance, runInteractionStoreConformance } from './interaction-store-conformance.js';
import { createMemoryInteractionStore } from './memory-interaction-store.js';
import { createScriptedBackendClient, functionCallChunk, textChunk, thoughtChunk } from './scripted-backend-client.js';

describeInteractionStoreConformance('memory', () => createMemoryInteractionStore(), { describe, it, expect });

describe('the conformance suite can fail', () => {
  it('catches a store whose take does not delete, and one that loses data', async () => {
    const leaky = (): InteractionStore => {
      const inner = createMemoryInteractionStore();
      return { ...inner, take: async (id) => ((await inner.has(id)) ? (await inner.take(id).then(async (value) => { await inner.save(id, value); return value; })) : undefined) };
    };
    const failures = (await runInteractionStoreConformance(leaky)).map((failure) => failure.name);
    expect(failures).toContain('take is single use: a second take finds nothing');
    expect(failures).toContain('ten concurrent takes of one id: exactly one gets the value');

    const lossy = (): InteractionStore => {
      const inner = createMemoryInteractionStore();
      return { ...inner, save: (id, value) => inner.save(id, JSON.parse(JSON.stringify(value).slice(0, 100_000).replace(/"[^"]*$/, '""}')) as unknown) };
    };
    expect((await runInteractionStoreConformance(lossy)).map((failure) => failure.name)).toContain('large values survive whole');
  });

  it('relaxes only the race case for eventually consistent stores', async () => {
    expect(await runInteractionStoreConformance(() => createMemoryInteractionStore(), { consistency: 'eventual' })).toEqual([]);
  });
});

describe('memory store', () => {
  it('expires entries after the ttl', async () => {
    let now = 0;
    const store = createMemoryInteractionStore({ ttlMs: 1000, now: () => now });
    await store.save('a', 1);
    now = 1001;
    expect(await store.has('a')).toBe(false);
    expect(await store.take('a')).toBeUndefined();
  });
});

describe('scripted backend', () => {
  it('plays turns in order, records requests, and says when the script runs out', async () => {
    const backend = createScriptedBackendClient([[thoughtChunk('hm'), functionCallChunk('f', { a: 1 }, { id: 'x' })], [textChunk('done')]]);
    const collect = async () => {
      const chunks = [];
      for await (const chunk of backend.streamGenerateContent('m', { contents: [{ role: 'user', parts: [{ text: 'go' }] }] })) chunks.push(chunk);
      return chunks;
    };
    expect((await collect())[1]?.candidates?.[0]?.content?.parts?.[0]).toEqual({ functionCall: { name: 'f', args: { a: 1 }, id: 'x' } });
    expect((await collect())[0]?.candidates?.[0]?.content?.parts?.[0]).toEqual({ text: 'done' });
    expect(backend.requests.map((request) => request.index)).toEqual([0, 1]);
    await expect(collect()).rejects.toThrow(/no turn 3/);
  });

  it('stops a stream when its signal aborts', async () => {
    const backend = createScriptedBackendClient([[textChunk('a'), textChunk('b'), textChunk('c')]], { chunkDelayMs: 20 });
    const controller = new AbortController();
    const seen: unknown[] = [];
    const consume = (async () => {
      for await (const chunk of backend.streamGenerateContent('m', { contents: [] }, controller.signal)) {
        seen.push(chunk);
        controller.abort();
      }
    })();
    await expect(consume).rejects.toMatchObject({ code: 'ABORTED' });
    expect(seen).toHaveLength(1);
    expect(backend.abortedCount).toBe(1);
  });
});
