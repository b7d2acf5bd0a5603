import { describe, expect, it } from 'vitest';
import type { LLMContent } from '../protocol/content.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';
import { createRequestSerializer } from './request-json.js';

describe('createRequestSerializer', () => {
  it('gives the same JSON as JSON.stringify, request after request of a growing history', () => {
    const serialize = createRequestSerializer();
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'line "one"\n' }] }];
    const settings = { generationConfig: { temperature: 1 }, tools: [{ functionDeclarations: [{ name: 'f', description: 'Does f.' }] }] };
    for (let turn = 0; turn < 5; turn += 1) {
      const body: GenerateContentRequest = { contents: contents.slice(), ...settings };
      expect(JSON.parse(serialize(body))).toEqual(JSON.parse(JSON.stringify(body)));
      contents.push({ role: 'model', parts: [{ functionCall: { name: 'f', args: { turn } }, thoughtSignature: 'c2ln' }] });
      contents.push({ role: 'user', parts: [{ functionResponse: { name: 'f', response: { ok: turn } } }] });
    }
    expect(serialize({ contents: [] })).toBe('{"contents":[]}');
  });

  it('serialises a content again when its parts were replaced or grew', () => {
    const serialize = createRequestSerializer();
    const content: LLMContent = { role: 'user', parts: [{ text: 'a' }] };
    expect(serialize({ contents: [content] })).toBe('{"contents":[{"role":"user","parts":[{"text":"a"}]}]}');
    content.parts.push({ text: 'b' });
    expect(serialize({ contents: [content] })).toBe('{"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]}]}');
    content.parts = [{ text: 'c' }];
    expect(serialize({ contents: [content] })).toBe('{"contents":[{"role":"user","parts":[{"text":"c"}]}]}');
  });
});
