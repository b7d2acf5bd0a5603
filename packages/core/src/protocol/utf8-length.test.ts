import { describe, expect, it } from 'vitest';
import { utf8Length } from './utf8-length.js';

describe('utf8Length', () => {
  it('counts what TextEncoder writes, lone surrogates included', () => {
    const texts = ['', 'abc', 'é', '\u4e00', '\u{1F600}', '\ud800', '\udc00', '\ud800\u4e00', '\ud800\u00e9', '\ud800\ud800\udc00', 'x\ud800', '\udc00\ud800'];
    for (const text of texts) expect([text, utf8Length(text)]).toEqual([text, new TextEncoder().encode(text).length]);
    // A high surrogate before a CJK character is 3 + 3 bytes, not a 4-byte pair.
    expect(utf8Length('\ud800\u4e00'.repeat(1000))).toBe(6000);
  });
});
