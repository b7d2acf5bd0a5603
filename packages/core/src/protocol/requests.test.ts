import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import { parseAgentRequestBody, parseAgentRequestText } from './requests.js';

function failure(action: () => unknown): AgentError {
  try {
    action();
  } catch (error) {
    if (error instanceof AgentError) return error;
    throw error;
  }
  throw new Error('expected a failure');
}

const segment = { textSegment: { text: 'Hi' } };

describe('request body limits', () => {
  it('refuses flags nested 100,000 levels deep before parsing them, naming the limit', () => {
    const deep = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const text = `{"start":{"segments":[{"textSegment":{"text":"Hi"}}],"flags":${deep}}}`;
    expect(failure(() => parseAgentRequestText(text))).toMatchObject({
      code: 'BAD_REQUEST',
      message: '(body): JSON nests deeper than the limit of 64 levels',
      details: { limit: 64 },
    });
  });

  it('accepts nesting up to the limit and counts brackets inside strings as text', () => {
    const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
    // The envelope, start and flags take three levels, so 61 more reach exactly 64.
    const body = (levels: number) => `{"start":{"segments":[{"textSegment":{"text":"[[[[{{{{\\"\\\\"}}],"flags":{"x":${nested(levels)}}}}`;
    expect(parseAgentRequestText(body(61), { maxJsonDepth: 64 }).kind).toBe('start');
    expect(failure(() => parseAgentRequestText(body(62), { maxJsonDepth: 64 })).message).toMatch(/limit of 64 levels/);
    expect(parseAgentRequestText(body(5), { maxJsonDepth: 8 }).kind).toBe('start');
    const parsed = parseAgentRequestText(body(1));
    expect(parsed.kind === 'start' && parsed.start.segments[0]).toEqual({ type: 'text', text: '[[[[{{{{"\\' });
  });

  it('checks the nesting of an already parsed body too', () => {
    let flags: Record<string, unknown> = {};
    for (let level = 0; level < 100; level += 1) flags = { next: flags };
    expect(failure(() => parseAgentRequestBody({ segments: [segment], flags })).message).toBe(
      '(root): JSON nests deeper than the limit of 64 levels',
    );
  });

  it('refuses more segments than the limit, naming the field and the limit', () => {
    const segments = Array.from({ length: 1001 }, () => segment);
    expect(failure(() => parseAgentRequestText(JSON.stringify({ start: { segments } })))).toMatchObject({
      code: 'BAD_REQUEST',
      message: 'start.segments: holds 1001 segments, more than the limit of 1000',
      details: { path: 'start.segments', limit: 1000 },
    });
    expect(parseAgentRequestBody({ segments: segments.slice(0, 3) }, { maxSegments: 3 }).kind).toBe('start');
    expect(failure(() => parseAgentRequestBody({ segments: segments.slice(0, 4) }, { maxSegments: 3 })).message).toBe(
      'segments: holds 4 segments, more than the limit of 3',
    );
  });

  it('refuses an interaction id longer than 256 characters', () => {
    expect(failure(() => parseAgentRequestBody({ resume: { interactionId: 'x'.repeat(257) } })).message).toMatch(/^resume\.interactionId: /);
  });

  it('quotes at most 80 characters of an unknown segment type, whole surrogate pairs only', () => {
    const huge = failure(() => parseAgentRequestText(JSON.stringify({ segments: [{ type: 'x'.repeat(1_000_000) }] })));
    expect(huge.message).toBe(`segments[0].type: Unknown segment type: ${'x'.repeat(80)}...`);
    const nested = failure(() => parseAgentRequestBody({ segments: [{ type: { a: 'y'.repeat(10_000) } }] }));
    expect(nested.message).toBe(`segments[0].type: Unknown segment type: {"a":"${'y'.repeat(74)}...`);
    // An emoji straddling the cut is left out whole, so the message is well-formed text.
    const emoji = failure(() => parseAgentRequestBody({ segments: [{ type: `${'z'.repeat(79)}\u{1F600}tail` }] }));
    expect(emoji.message).toBe(`segments[0].type: Unknown segment type: ${'z'.repeat(79)}...`);
    expect(emoji.message).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });
});
