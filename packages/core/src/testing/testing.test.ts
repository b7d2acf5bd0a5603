import { describe, expect, it } from 'vitest';
import type { InteractionStore } from '../ports/index.js';
import { describeInteractionStoreConformance, runInteractionStoreConformance } from './interaction-store-conformance.js';
import { createMemoryInteractionStore } from './memory-interaction-store.js';
import { createScriptedBackendClient, functionCallChunk, textChunk, thoughtChunk } from './scripted-backend-client.js';

describeInteractionStoreConformance('memory', (options) => createMemoryInteractionStore(options), { describe, it, expect });

describe('the conformance suite can fail', () => {
  it('catches a store whose conditional write is not conditional, and one that loses data', async () => {
    // Checks that a record exists, but not which version it is: two claimants can both win.
    const careless = (): InteractionStore => {
      const records = new Map<string, { meta: string; state: string; version: string }>();
      let versions = 0;
      return {
        get: async (id) => records.get(id),
        set: async (id, write, expected) => {
          const current = records.get(id);
          if (expected === null ? current !== undefined : current === undefined) return undefined;
          versions += 1;
          records.set(id, { meta: write.meta, state: write.state ?? current?.state ?? '', version: String(versions) });
          return String(versions);
        },
        delete: async (id) => records.delete(id),
      };
    };
    const failures = (await runInteractionStoreConformance(careless)).map((failure) => failure.name);
    expect(failures).toContain('a hundred conditional writes over one version: exactly one wins');
    expect(failures).toContain('a hundred claimants of one interaction: exactly one claims it');

    const lossy = (): InteractionStore => {
      const inner = createMemoryInteractionStore();
      return { ...inner, set: (id, write, expected) => inner.set(id, write.state ? { ...write, state: write.state.slice(0, 100_000) } : write, expected) };
    };
    expect((await runInteractionStoreConformance(lossy)).map((failure) => failure.name)).toContain('large states survive whole, and a meta-only write keeps them');
  });

  it('asks an eventually consistent store only for what it can do', async () => {
    expect(await runInteractionStoreConformance((options) => createMemoryInteractionStore(options), { consistency: 'eventual' })).toEqual([]);
  });
});

describe('memory store', () => {
  it('expires records after the ttl', async () => {
    let now = 0;
    const store = createMemoryInteractionStore({ ttlMs: 1000, now: () => now });
    await store.set('a', { meta: '{}', state: '1' }, null);
    now = 1001;
    expect(await store.get('a')).toBeUndefined();
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
