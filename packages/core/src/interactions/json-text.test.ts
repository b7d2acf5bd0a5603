import { describe, expect, it } from 'vitest';
import { createJsonTextEncoder, toJsonText } from './json-text.js';

const options = { label: 'Interaction i-1' };

/** What saving is refused with: `STORE_ERROR` naming where the value is not JSON. */
const notJson = (where: string) => expect.objectContaining({ code: 'STORE_ERROR', message: `Interaction i-1 cannot be saved: ${where}` });

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
    for (const [value, where] of cases) expect(() => toJsonText(value, options)).toThrow(notJson(where));
  });

  it('leaves out undefined properties, as JSON does, and keeps the rest exactly', () => {
    expect(toJsonText({ a: 'x', b: undefined, c: [1.5, true, null] }, options)).toBe('{"a":"x","c":[1.5,true,null]}');
  });

  it('refuses a value nested deeper than the limit and one bigger than the byte limit', () => {
    expect(() => toJsonText({ a: { b: { c: 1 } } }, { ...options, maxDepth: 2 })).toThrow(notJson('a.b: nests deeper than 2 levels'));
    expect(() => toJsonText({ text: 'é'.repeat(10) }, { ...options, maxBytes: 20 })).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE', details: { size: 31, limit: 20 } }),
    );
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
    const infinite = { role: 'model', parts: [{ functionCall: { name: 'f', args: { n: Infinity } } }] };
    expect(() => encode({ contents: [first, infinite] })).toThrow(notJson('contents[1].parts[0].functionCall.args.n: Infinity is not JSON'));
    first.parts = [{ text: 'hi' }, { at: new Date(0) } as never];
    expect(() => encode({ contents: [first] })).toThrow(notJson('contents[0].parts[1].at: a Date object is not JSON'));
    expect(() => encode({ contents: [undefined] })).toThrow(notJson('contents[0]: undefined is not JSON'));
    const shallow = createJsonTextEncoder({ ...options, maxDepth: 4 });
    const nested = { contents: [{ role: 'user', parts: [{ text: 'deep' }] }] };
    expect(() => shallow(nested)).toThrow(notJson('contents[0].parts[0]: nests deeper than 4 levels'));
    expect(() => toJsonText(nested, { ...options, maxDepth: 4 })).toThrow(notJson('contents[0].parts[0]: nests deeper than 4 levels'));
  });

  it('checks the rest of the state every time, and the byte limit on the whole text', () => {
    const encode = createJsonTextEncoder({ ...options, maxBytes: 200 });
    const contents = [{ role: 'user', parts: [{ text: 'x'.repeat(100) }] }];
    expect(() => encode({ contents, flags: { when: Number.NaN } })).toThrow(notJson('flags.when: NaN is not JSON'));
    encode({ contents });
    contents.push({ role: 'model', parts: [{ text: 'y'.repeat(100) }] });
    expect(() => encode({ contents })).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
  });

  it('encodes a value that is not a state with a history as toJsonText does', () => {
    const encode = createJsonTextEncoder(options);
    expect(encode({ contents: 'none', n: 1 })).toBe('{"contents":"none","n":1}');
    expect(encode([1, 2])).toBe('[1,2]');
    expect(() => encode({ contents: [], at: new Date(0) })).toThrow(notJson('at: a Date object is not JSON'));
  });
});
