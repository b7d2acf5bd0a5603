import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import { createJsonTextEncoder, toJsonText } from './json-text.js';

const options = { label: 'Interaction i-1' };

function refusal(encode: () => string): AgentError {
  try {
    encode();
  } catch (error) {
    if (error instanceof AgentError) return error;
    throw error;
  }
  throw new Error('the value was accepted');
}

describe('toJsonText', () => {
  it('refuses what JSON would change or drop, naming where it is', () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    const cases: Array<[unknown, string]> = [
      [{ flags: { score: Number.NaN } }, 'flags.score: NaN is not JSON'],
      [{ list: [1, undefined] }, 'list[1]: undefined is not JSON'],
      [{ at: new Date(0) }, 'at: a Date object is not JSON'],
      [{ size: 10n }, 'size: a bigint is not JSON'],
      [{ nested: cyclic }, 'nested.self: refers to itself (a cycle)'],
    ];
    for (const [value, where] of cases) {
      const error = refusal(() => toJsonText(value, options));
      expect(error.code).toBe('STORE_ERROR');
      expect(error.message).toBe(`Interaction i-1 cannot be saved: ${where}`);
    }
  });

  it('leaves out undefined properties, as JSON does, and keeps the rest exactly', () => {
    expect(toJsonText({ a: 'x', b: undefined, c: [1.5, true, null] }, options)).toBe('{"a":"x","c":[1.5,true,null]}');
  });

  it('refuses a value nested deeper than the limit and one bigger than the byte limit', () => {
    expect(refusal(() => toJsonText({ a: { b: { c: 1 } } }, { ...options, maxDepth: 2 })).message).toContain('nests deeper');
    const large = refusal(() => toJsonText({ text: 'é'.repeat(10) }, { ...options, maxBytes: 20 }));
    expect(large).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', details: { size: 31, limit: 20 } });
  });
});

describe('createJsonTextEncoder', () => {
  it('gives the same value as toJsonText state after state of a growing history', () => {
    const encode = createJsonTextEncoder(options);
    const contents: unknown[] = [{ role: 'user', parts: [{ text: 'weather "here"?\n' }] }];
    for (let turn = 0; turn < 4; turn += 1) {
      const state = { version: 1, kind: 'checkpoint', contents, flags: { turn }, turnCount: turn, skipped: undefined };
      expect(JSON.parse(encode(state))).toEqual(JSON.parse(toJsonText(state, options)));
      contents.push({ role: 'model', parts: [{ functionCall: { name: 'f', args: { turn } }, thoughtSignature: 'c2ln' }] });
      contents.push({ role: 'user', parts: [{ functionResponse: { name: 'f', response: { turn } } }] });
    }
    expect(encode({ contents: [] })).toBe('{"contents":[]}');
  });

  it('checks each new content, and a content whose parts were replaced, naming the path in the state', () => {
    const encode = createJsonTextEncoder(options);
    const first = { role: 'user', parts: [{ text: 'hi' }] };
    encode({ contents: [first] });
    const bad = refusal(() => encode({ contents: [first, { role: 'model', parts: [{ functionCall: { name: 'f', args: { n: Infinity } } }] }] }));
    expect(bad.message).toBe('Interaction i-1 cannot be saved: contents[1].parts[0].functionCall.args.n: Infinity is not JSON');
    first.parts = [{ text: 'hi' }, { at: new Date(0) } as never];
    expect(refusal(() => encode({ contents: [first] })).message).toBe('Interaction i-1 cannot be saved: contents[0].parts[1].at: a Date object is not JSON');
    expect(refusal(() => encode({ contents: [undefined] })).message).toBe('Interaction i-1 cannot be saved: contents[0]: undefined is not JSON');
  });

  it('checks the rest of the state every time, and the byte limit on the whole text', () => {
    const encode = createJsonTextEncoder({ ...options, maxBytes: 200 });
    const contents = [{ role: 'user', parts: [{ text: 'x'.repeat(100) }] }];
    expect(refusal(() => encode({ contents, flags: { when: Number.NaN } })).message).toBe('Interaction i-1 cannot be saved: flags.when: NaN is not JSON');
    encode({ contents });
    contents.push({ role: 'model', parts: [{ text: 'y'.repeat(100) }] });
    expect(refusal(() => encode({ contents }))).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
  });

  it('encodes a value that is not a state with a history as toJsonText does', () => {
    const encode = createJsonTextEncoder(options);
    expect(encode({ contents: 'none', n: 1 })).toBe('{"contents":"none","n":1}');
    expect(encode([1, 2])).toBe('[1,2]');
    expect(refusal(() => encode({ contents: [], at: new Date(0) })).message).toContain('at: a Date object is not JSON');
  });
});
