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

  it('keeps two calls of one name apart, and two calls under one id too, each with its own arguments', () => {
    const accumulator = new ModelTurnAccumulator();
    const chunk = (parts: Part[]): GenerateContentResponse => ({ candidates: [{ content: { role: 'model', parts } }] });
    accumulator.push(chunk([{ functionCall: { name: 'f', args: { x: 1 } } }, { functionCall: { name: 'f', args: { z: 3 } } }]));
    accumulator.push(chunk([{ functionCall: { id: 'call_0', name: 'f', args: { x: 1 } } }]));
    // A mock that numbers every call `call_0`: merging would run f with g's arguments, and g never.
    accumulator.push(chunk([{ functionCall: { id: 'call_0', name: 'g', args: { y: 2 } } }]));
    const { functionCalls } = accumulator.finish();
    expect(functionCalls.map((call) => [call.name, call.args, call.providerId])).toEqual([
      ['f', { x: 1 }, undefined],
      ['f', { z: 3 }, undefined],
      ['f', { x: 1 }, 'call_0'],
      ['g', { y: 2 }, 'call_0'],
    ]);
    expect(new Set(functionCalls.map((call) => call.callId)).size).toBe(4);
  });
});

/** A chunk of candidate 0 with `parts`, and `extra` fields on the candidate. */
const partsChunk = (parts: unknown[], extra: Record<string, unknown> = {}): GenerateContentResponse =>
  ({ candidates: [{ content: { role: 'model', parts }, ...extra }] }) as GenerateContentResponse;

/** What `push` throws for `chunks`, or `undefined`. */
function failureOf(chunks: unknown[]): { code: string; message: string; details?: Record<string, unknown> } | undefined {
  const accumulator = new ModelTurnAccumulator();
  try {
    for (const chunk of chunks) accumulator.push(chunk as GenerateContentResponse);
    accumulator.finish();
  } catch (error) {
    return error as { code: string; message: string; details?: Record<string, unknown> };
  }
  return undefined;
}

describe('ModelTurnAccumulator on streams of other shapes', () => {
  it('takes a candidate without content, with content {} or with a content that has no parts as a turn with no parts', () => {
    for (const candidate of [{ finishReason: 'SAFETY' }, { content: {}, finishReason: 'SAFETY' }, { content: { role: 'model' }, finishReason: 'MAX_TOKENS' }]) {
      const { turn } = accumulate([{ candidates: [candidate] } as GenerateContentResponse]);
      expect(turn.content.parts).toEqual([]);
      expect(turn.finishReason).toBe(candidate.finishReason);
    }
  });

  it('joins the text of a stream that repeats finishReason on every event (gemini-pro), and takes usage from a last event without candidates', () => {
    const { turn } = accumulate([
      partsChunk([{ text: 'The sky ' }], { finishReason: 'STOP', index: 0 }),
      partsChunk([{ text: 'is blue.' }], { finishReason: 'STOP', index: 0 }),
      { usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 4, totalTokenCount: 8 } },
    ]);
    expect(turn.content.parts).toEqual([{ text: 'The sky is blue.' }]);
    expect(turn.finishReason).toBe('STOP');
    expect(turn.usageMetadata).toEqual({ promptTokenCount: 4, candidatesTokenCount: 4, totalTokenCount: 8 });
  });

  it('builds the turn from candidate 0 only, wherever it sits in a chunk, and keeps fields it does not know', () => {
    const { turn } = accumulate([
      { candidates: [{ index: 1, content: { role: 'model', parts: [{ text: 'Other ' }] } }] } as GenerateContentResponse,
      {
        candidates: [
          { index: 1, content: { role: 'model', parts: [{ text: 'answer.' }] }, finishReason: 'STOP' },
          { content: { role: 'model', parts: [{ text: 'Chosen answer.', futurePartField: { a: 1 } }] }, finishReason: 'STOP', futureCandidateField: 2 },
        ],
      } as GenerateContentResponse,
    ]);
    expect(turn.content.parts).toEqual([{ text: 'Chosen answer.', futurePartField: { a: 1 } }]);
    expect(turn.candidateMetadata).toEqual({ futureCandidateField: 2 });
    // A stream of other candidates only has no turn at all.
    const accumulator = new ModelTurnAccumulator();
    accumulator.push({ candidates: [{ index: 1, content: { role: 'model', parts: [{ text: 'x' }] } }] } as GenerateContentResponse);
    expect(accumulator.sawCandidate).toBe(false);
  });

  it('refuses a function call without a name, naming the field, and never announces it', () => {
    const accumulator = new ModelTurnAccumulator();
    expect(() => accumulator.push(partsChunk([{ text: 'Let me check.' }, { functionCall: { args: { city: 'Lisbon' } } }]))).toThrow(
      expect.objectContaining({
        code: 'MODEL_ERROR',
        message: 'The model sent a malformed answer: candidates[0].content.parts[1].functionCall.name: missing (a function call needs the name of the function)',
        details: { field: 'candidates[0].content.parts[1].functionCall.name' },
      }),
    );
    expect(failureOf([partsChunk([{ functionCall: { name: 7, args: {} } }])])).toMatchObject({ message: expect.stringMatching(/functionCall\.name: expected a non-empty string, got a number$/) });
    // Arguments sent after the call under its id are not a call of their own either.
    expect(
      failureOf([partsChunk([{ functionCall: { id: 'a', name: 'f', args: { x: 1 } } }]), partsChunk([{ functionCall: { id: 'a', args: { y: 2 } } }])]),
    ).toMatchObject({ code: 'MODEL_ERROR', message: expect.stringMatching(/parts\[0\]\.functionCall\.name: missing \(a function call needs the name of the function\)$/) });
  });

  it('refuses arguments that are not an object, and reads null or missing arguments as none', () => {
    for (const [args, kind] of [[[1, 2], 'an array'], ['{"x":1}', 'a string'], [5, 'a number']] as const) {
      expect(failureOf([partsChunk([{ functionCall: { name: 'f', args } }])])).toMatchObject({
        code: 'MODEL_ERROR',
        message: `The model sent a malformed answer: candidates[0].content.parts[0].functionCall.args: expected an object, got ${kind}`,
      });
    }
    const { turn } = accumulate([partsChunk([{ functionCall: { name: 'f', args: null } }, { functionCall: { name: 'g' } }])]);
    expect(turn.functionCalls.map((call) => call.args)).toEqual([{}, {}]);
    expect(turn.content.parts).toEqual([{ functionCall: { name: 'f', args: {} } }, { functionCall: { name: 'g', args: {} } }]);
  });

  it('takes fields sent as null (a mock that writes every field) as fields not sent', () => {
    const { turn } = accumulate([
      partsChunk([{ text: 'Checking.', functionCall: null, thoughtSignature: null }]),
      partsChunk([{ text: null, functionCall: { id: null, name: 'f', args: null, partialArgs: null, willContinue: null } }], { finishReason: 'STOP' }),
    ]);
    expect(turn.functionCalls.map((call) => [call.name, call.args, call.providerId])).toEqual([['f', {}, undefined]]);
    expect(turn.content.parts.map((part) => part.text ?? part.functionCall?.name)).toEqual(['Checking.', 'f']);
  });

  it('refuses chunks, candidates and parts that are not objects, naming the field instead of crashing', () => {
    const cases: Array<[unknown, string]> = [
      [null, 'response chunk: expected a JSON object, got null'],
      [42, 'response chunk: expected a JSON object, got a number'],
      [[{ candidates: [] }], 'response chunk: expected a JSON object, got an array'],
      [{ candidates: 'none' }, 'candidates: expected an array, got a string'],
      [{ candidates: [null] }, 'candidates[0]: expected an object, got null'],
      [{ candidates: [{ content: 'hi' }] }, 'candidates[0].content: expected an object, got a string'],
      [{ candidates: [{ content: { parts: 'hi' } }] }, 'candidates[0].content.parts: expected an array, got a string'],
      [partsChunk([{ text: 'a' }, null]), 'candidates[0].content.parts[1]: expected an object, got null'],
      [partsChunk([{ text: 5 }]), 'candidates[0].content.parts[0].text: expected a string, got a number'],
      [partsChunk([{ functionCall: 'f' }]), 'candidates[0].content.parts[0].functionCall: expected an object, got a string'],
    ];
    for (const [chunk, problem] of cases) {
      expect(failureOf([chunk]), JSON.stringify(chunk)).toMatchObject({ code: 'MODEL_ERROR', message: `The model sent a malformed answer: ${problem}` });
    }
  });
});

describe('ModelTurnAccumulator on calls streamed in fragments (Vertex AI willContinue / partialArgs)', () => {
  const fragment = (functionCall: Record<string, unknown>, extra: Record<string, unknown> = {}) => partsChunk([{ functionCall, ...extra }]);
  const partial = (jsonPath: string, value: Record<string, unknown>, more = false) =>
    fragment({ partialArgs: [{ jsonPath, ...value, ...(more ? { willContinue: true } : {}) }], willContinue: true });
  /** Two calls as Vertex streams them: a named opening fragment, argument fragments, an empty closing one. */
  const stream = (): GenerateContentResponse[] => [
    fragment({ name: 'cook', willContinue: true }, { thoughtSignature: 'c2lnLTE=' }),
    partial('$.recipe.ingredients[0].amount', { stringValue: '16 ' }, true),
    partial('$.recipe.ingredients[0].amount', { stringValue: 'oz' }, true),
    partial('$.recipe.ingredients[0].amount', { stringValue: '' }),
    partial('$.recipe.ingredients[0].name', { stringValue: 'Lasagna noodles' }),
    partial("$.recipe['serves']", { numberValue: 4 }),
    partial('$.recipe.vegetarian', { boolValue: false }),
    partial('$.recipe.tags[0]', { stringValue: 'baked' }),
    partial('$.recipe.note', { nullValue: 'NULL_VALUE' }),
    fragment({}),
    fragment({ name: 'read_screen', willContinue: true }),
    partial('$.id', { stringValue: 'B' }),
    fragment({}),
    partsChunk([{ text: '' }], { finishReason: 'STOP' }),
  ];
  const cook = { recipe: { ingredients: [{ amount: '16 oz', name: 'Lasagna noodles' }], serves: 4, vegetarian: false, tags: ['baked'], note: null } };

  it('joins each call into one part with its signature, and announces it once, when it is complete', () => {
    const accumulator = new ModelTurnAccumulator();
    const announced = stream().map((chunk) => accumulator.push(chunk).functionCalls.map((call) => call.name));
    expect(announced).toEqual([[], [], [], [], [], [], [], [], [], ['cook'], [], [], ['read_screen'], []]);
    const turn = accumulator.finish();
    expect(turn.functionCalls.map((call) => [call.name, call.args])).toEqual([['cook', cook], ['read_screen', { id: 'B' }]]);
    // The history gets whole calls, in place, without the streaming fields.
    expect(turn.content.parts).toEqual([
      { functionCall: { name: 'cook', args: cook }, thoughtSignature: 'c2lnLTE=' },
      { functionCall: { name: 'read_screen', args: { id: 'B' } } },
      { text: '' },
    ]);
    expect(() => validateHistory([{ role: 'user', parts: [{ text: 'go' }] }, turn.content])).not.toThrow();
  });

  it('closes a call at a fragment without willContinue, at the next part, or at the finish reason, when the empty closing fragment is missing', () => {
    const lastFragment = accumulate([
      fragment({ name: 'write', willContinue: true }),
      fragment({ partialArgs: [{ jsonPath: '$.items[0]', numberValue: 0.5 }] }),
      partsChunk([{ text: '' }], { finishReason: 'STOP' }),
    ]).turn;
    expect(lastFragment.functionCalls.map((call) => call.args)).toEqual([{ items: [0.5] }]);
    const nextCall = accumulate([fragment({ name: 'a', willContinue: true }), partial('$.x', { stringValue: '1' }), fragment({ name: 'b', args: {} }, {})]).turn;
    expect(nextCall.functionCalls.map((call) => [call.name, call.args])).toEqual([['a', { x: '1' }], ['b', {}]]);
    const finished = accumulate([fragment({ name: 'a', willContinue: true }), partsChunk([], { finishReason: 'STOP' })]).turn;
    expect(finished.functionCalls.map((call) => call.name)).toEqual(['a']);
  });

  it('refuses an argument path it cannot follow, a fragment without a value, and an answer that ends inside a call', () => {
    const open = fragment({ name: 'f', willContinue: true });
    expect(failureOf([open, partial('recipe.name', { stringValue: 'x' })])).toMatchObject({
      code: 'MODEL_ERROR',
      message: `The model sent a malformed answer: candidates[0].content.parts[0].functionCall.partialArgs[0].jsonPath: cannot read "recipe.name" (expected $ followed by .name, ['name'] or [index] steps)`,
    });
    expect(failureOf([open, partial('$.list[3]', { stringValue: 'x' })])).toMatchObject({ message: expect.stringMatching(/"\$\.list\[3\]" skips elements of an array$/) });
    expect(failureOf([open, partial('$.a', { stringValue: 'x' }), partial('$.a.b', { stringValue: 'y' })])).toMatchObject({
      message: expect.stringMatching(/"\$\.a\.b" names a field of a value that is not an object$/),
    });
    expect(failureOf([open, partial('$.a', {})])).toMatchObject({
      message: expect.stringMatching(/partialArgs\[0\]: expected a stringValue, numberValue, boolValue or nullValue$/),
    });
    expect(failureOf([open, partial('$.a', { stringValue: 'x' })])).toMatchObject({
      code: 'MODEL_ERROR',
      message: 'The model sent a malformed answer: functionCall.willContinue: the answer ended while function call f was still streaming its arguments',
    });
    // A key of the model's never reaches a prototype.
    const { turn } = accumulate([open, partial('$.__proto__.polluted', { boolValue: true }), fragment({})]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.stringify(turn.functionCalls[0]?.args)).toBe('{"__proto__":{"polluted":true}}');
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
