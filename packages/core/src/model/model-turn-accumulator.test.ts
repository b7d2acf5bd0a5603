import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { LLMContent, Part } from '../protocol/content.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { HistoryValidator, validateHistory } from './history.js';
import { ModelTurnAccumulator, type ModelTurn } from './model-turn-accumulator.js';

const fixtures = new URL('../../../../fixtures/gemini/', import.meta.url);

function chunksOf(name: string): GenerateContentResponse[] {
  const text = readFileSync(new URL(name, fixtures), 'utf8');
  if (name.endsWith('.json')) return JSON.parse(text) as GenerateContentResponse[];
  return text
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => JSON.parse(line.slice(5)) as GenerateContentResponse);
}

function accumulate(chunks: GenerateContentResponse[]): { turn: ModelTurn; thoughts: string[] } {
  const accumulator = new ModelTurnAccumulator();
  const thoughts: string[] = [];
  for (const chunk of chunks) thoughts.push(...accumulator.push(chunk).thoughts);
  return { turn: accumulator.finish(), thoughts };
}

/** Every part of the stream that carried a signature, with the text or call it was on. */
function signedPieces(chunks: GenerateContentResponse[]): Array<{ signature: string; call?: string }> {
  const pieces: Array<{ signature: string; call?: string }> = [];
  for (const chunk of chunks) {
    for (const part of chunk.candidates?.[0]?.content?.parts ?? []) {
      if (typeof part.thoughtSignature === 'string') {
        pieces.push(part.functionCall ? { signature: part.thoughtSignature, call: part.functionCall.name } : { signature: part.thoughtSignature });
      }
    }
  }
  return pieces;
}

const streams = readdirSync(fixtures).filter(
  (name) => (name.startsWith('stream-') && name.endsWith('.sse')) || name.startsWith('stream-nonsse-'),
);
const blocked = (name: string) => name.includes('prompt-blocked');

describe('ModelTurnAccumulator over every recorded Gemini stream', () => {
  it.each(streams.filter((name) => !blocked(name)))('%s: merges text, keeps signatures, and replays cleanly', (name) => {
    const chunks = chunksOf(name);
    const { turn, thoughts } = accumulate(chunks);
    const streamedParts = chunks.flatMap((chunk) => chunk.candidates?.[0]?.content?.parts ?? []);

    // Visible and thought text arrive whole, in order.
    const join = (parts: Part[], thought: boolean) =>
      parts.filter((part) => typeof part.text === 'string' && (part.thought === true) === thought).map((part) => part.text).join('');
    expect(join(turn.content.parts, false)).toBe(join(streamedParts, false));
    expect(join(turn.content.parts, true)).toBe(join(streamedParts, true));
    expect(thoughts.join('')).toBe(join(streamedParts, true));
    // No two neighbouring plain text parts of the same kind are left unmerged.
    turn.content.parts.forEach((part, index) => {
      const next = turn.content.parts[index + 1];
      const plain = (candidate: Part | undefined) =>
        candidate !== undefined && Object.keys(candidate).every((key) => key === 'text' || key === 'thought');
      if (plain(part) && plain(next)) expect(part.thought === true).not.toBe(next?.thought === true);
    });

    // Every signature is still there, on a part of the same kind.
    const kept = turn.content.parts.filter((part) => typeof part.thoughtSignature === 'string');
    expect(kept.map((part) => part.thoughtSignature)).toEqual(signedPieces(chunks).map((piece) => piece.signature));
    signedPieces(chunks).forEach((piece, index) => expect(kept[index]?.functionCall?.name).toBe(piece.call));

    // Every call gets a distinct UUID of ours; a provider's id stays in its part and beside it,
    // and ours never reaches the provider's parts.
    for (const call of turn.functionCalls) {
      expect(call.callId).toMatch(/^[0-9a-f-]{36}$/);
      expect(call.part.functionCall?.id).toBe(call.providerId);
    }
    expect(new Set(turn.functionCalls.map((call) => call.callId)).size).toBe(turn.functionCalls.length);

    // Usage and finish reason are kept from the stream.
    const lastUsage = chunks.filter((chunk) => chunk.usageMetadata).at(-1)?.usageMetadata;
    if (lastUsage) expect(turn.usageMetadata).toEqual(lastUsage);

    // The next request carries the content back untouched and passes the history check.
    const responses: LLMContent = {
      role: 'user',
      parts: turn.functionCalls.map((call) => ({
        functionResponse: call.providerId
          ? { id: call.providerId, name: call.name, response: { ok: true } }
          : { name: call.name, response: { ok: true } },
      })),
    };
    const history: LLMContent[] = [{ role: 'user', parts: [{ text: 'go' }] }, turn.content];
    if (responses.parts.length > 0) history.push(responses);
    const replayed = JSON.parse(JSON.stringify(history)) as LLMContent[];
    expect(replayed[1]).toEqual(turn.content);
    expect(() => validateHistory(replayed)).not.toThrow();
  });

  it('keeps the trailing empty text part that carries only a signature', () => {
    const { turn } = accumulate(chunksOf('stream-text-gemini-3-pro-trailing-empty-text-thought-signature.sse'));
    const last = turn.content.parts.at(-1);
    expect(last?.text).toBe('');
    expect(typeof last?.thoughtSignature).toBe('string');
    expect(turn.content.parts).toHaveLength(2);
  });

  it('signs only the first call of a parallel batch and keeps both calls', () => {
    const [response] = [JSON.parse(readFileSync(new URL('generate-parallel-function-calls-signature-on-first-gemini-3-flash.json', fixtures), 'utf8'))];
    const { turn } = accumulate([response as GenerateContentResponse]);
    expect(turn.functionCalls.length).toBeGreaterThan(1);
    expect(typeof turn.functionCalls[0]?.part.thoughtSignature).toBe('string');
    expect(turn.functionCalls[1]?.part.thoughtSignature).toBeUndefined();
    expect(turn.functionCalls[0]?.callId).not.toBe(turn.functionCalls[1]?.callId);
  });

  it('keeps grounding and URL-context metadata with the turn', () => {
    expect(accumulate(chunksOf('stream-google-search-grounding-gemini-2.5-pro.sse')).turn.candidateMetadata).toHaveProperty('groundingMetadata');
    expect(accumulate(chunksOf('stream-url-context-metadata-gemini-2.5-flash.sse')).turn.candidateMetadata).toHaveProperty('urlContextMetadata');
  });

  it('reports MAX_TOKENS without crashing', () => {
    expect(accumulate(chunksOf('stream-text-finish-max-tokens-gemini-2.5-flash.sse')).turn.finishReason).toBe('MAX_TOKENS');
  });

  it.each(streams.filter(blocked))('%s: a blocked prompt is a MODEL_ERROR naming the reason', (name) => {
    expect(() => accumulate(chunksOf(name))).toThrow(/blockReason/);
  });

  it('merges argument fragments of one call by id, never by name', () => {
    const accumulator = new ModelTurnAccumulator();
    const chunk = (parts: Part[]): GenerateContentResponse => ({ candidates: [{ content: { role: 'model', parts } }] });
    accumulator.push(chunk([{ functionCall: { id: 'a', name: 'f', args: { x: 1 } } }]));
    accumulator.push(chunk([{ functionCall: { id: 'a', name: 'f', args: { y: 2 } } }, { functionCall: { name: 'f', args: { z: 3 } } }]));
    const turn = accumulator.finish();
    expect(turn.functionCalls.map((call) => call.args)).toEqual([{ x: 1, y: 2 }, { z: 3 }]);
  });
});

describe('validateHistory', () => {
  const base = (): LLMContent[] => [
    { role: 'user', parts: [{ text: 'go' }] },
    {
      role: 'model',
      parts: [
        { functionCall: { id: 'c1', name: 'a', args: {} }, thoughtSignature: 'sig' },
        { functionCall: { id: 'c2', name: 'b', args: {} } },
      ],
    },
    {
      role: 'user',
      parts: [
        { functionResponse: { id: 'c1', name: 'a', response: {} } },
        { functionResponse: { id: 'c2', name: 'b', response: {} } },
      ],
    },
  ];

  it('accepts a well-formed history', () => expect(() => validateHistory(base())).not.toThrow());

  it('fails, naming the content, when the first call lost its signature', () => {
    const history = base();
    const parts = history[1]?.parts ?? [];
    delete parts[0]?.thoughtSignature;
    parts[1] = { ...parts[1], thoughtSignature: 'other' };
    expect(() => validateHistory(history)).toThrow(/^contents\[1\]: the first function call \(a\) lost its thoughtSignature/);
  });

  it('fails on a response without a call, a count mismatch, and an id used twice in one turn', () => {
    expect(() => validateHistory([{ role: 'user', parts: [{ functionResponse: { name: 'x', response: {} } }] }])).toThrow(
      /^contents\[0\]: function response "x" has no function call/,
    );
    const short = base();
    short[2]?.parts.pop();
    expect(() => validateHistory(short)).toThrow(/^contents\[2\]: 1 function responses answer 2 function calls/);
    const twice = base();
    twice.push({ role: 'model', parts: [{ functionCall: { id: 'c9', name: 'a', args: {} } }, { functionCall: { id: 'c9', name: 'b', args: {} } }] });
    expect(() => validateHistory(twice)).toThrow(/^contents\[3\]: function call id "c9" is used twice in one turn/);
  });

  it('takes an id a later turn uses again (mock models count from call_0 each turn)', () => {
    const reused = base();
    reused.push({ role: 'model', parts: [{ functionCall: { id: 'c1', name: 'a', args: {} } }] });
    reused.push({ role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'a', response: {} } }] });
    expect(() => validateHistory(reused)).not.toThrow();
  });

  it('checks only what was appended since the last check, and still catches a problem there', () => {
    const validator = new HistoryValidator();
    const history = base();
    validator.check(history);
    // A content already checked is not looked at again (the history of a run is append-only)...
    const parts = history[1]?.parts ?? [];
    delete parts[0]?.thoughtSignature;
    expect(() => validator.check(history)).not.toThrow();
    // ...while an appended one is.
    history.push({ role: 'user', parts: [{ functionResponse: { name: 'b', response: {} } }] });
    expect(() => validator.check(history)).toThrow(/^contents\[3\]: function response "b" has no function call before it/);
  });

  it('checks a history whole again when it is not the last one grown at its end', () => {
    const validator = new HistoryValidator();
    validator.check(base());
    const broken = base();
    broken[2]?.parts.pop();
    expect(() => validator.check(broken)).toThrow(/^contents\[2\]: 1 function responses answer 2 function calls/);
    expect(() => validator.check(base())).not.toThrow();
    expect(() => validator.check(base().slice(0, 1))).not.toThrow();
  });
});
