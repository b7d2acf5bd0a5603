import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LLMContentSchema, AgentResultSchema, PartSchema } from './content.js';
import { AgentResultShape } from './events.js';
import { LLMContentShape, PartShape } from './content-shapes.js';
import { fromWireEvent } from './wire.js';
import { ShapeIssue } from './shape.js';
import { toZodSchema } from './zod-schemas.js';
import { AGENT_EVENT_PAYLOADS, type AgentEventType } from './events.js';

function refusal(action: () => unknown): { message: string; code?: string; details?: unknown } {
  try {
    action();
  } catch (error) {
    return error as { message: string; code?: string; details?: unknown };
  }
  throw new Error('expected the event to be refused');
}

describe('event shapes', () => {
  it('name the full path of a bad field, deep inside contents', () => {
    const error = refusal(() =>
      fromWireEvent({ content: { content: { role: 'model', parts: [{ text: 'ok' }, { functionCall: { name: 7 } }] } } }),
    );
    expect(error.message).toBe('content.content.parts[1].functionCall.name: expected string, got number');
    expect(error.code).toBe('BAD_REQUEST');
    expect(error.details).toEqual({ path: 'content.content.parts[1].functionCall.name' });
    expect(refusal(() => fromWireEvent({ functionCall: { callId: 'c', name: 'f' } })).message).toBe(
      'functionCall.args: expected object, got undefined',
    );
    expect(refusal(() => fromWireEvent({ waitForChoice: { requestId: 'r', prompt: { parts: [] }, choices: [], selectionMode: 'some' } })).message).toBe(
      'waitForChoice.selectionMode: expected one of "single", "multiple", got string',
    );
  });

  it('give back the very objects they were handed, unknown fields included', () => {
    const content = { role: 'model', parts: [{ text: 'hi', thoughtSignature: 'c2ln', later: { v: 1 } }], extra: true };
    const event = fromWireEvent({ content: { content } });
    expect(event.type === 'content' && event.content).toBe(content);
  });

  it('read an error code this client does not know as absent, and keep the message', () => {
    const wire = { error: { message: 'quota', code: 'SOMETHING_NEW', interactionId: 'i1' } };
    expect(fromWireEvent(wire)).toEqual({ type: 'error', message: 'quota', interactionId: 'i1' });
    expect(wire.error.code).toBe('SOMETHING_NEW');
    expect(fromWireEvent({ error: { message: 'quota', code: 'RATE_LIMITED' } })).toEqual({ type: 'error', message: 'quota', code: 'RATE_LIMITED' });
  });
});

describe('zod schemas built from the shapes', () => {
  const samples: unknown[] = [
    { parts: [{ text: 'a', thought: true, thoughtSignature: 's', future: [1] }], role: 'user' },
    { parts: [{ inlineData: { mimeType: 'image/png', data: 'AAA' } }] },
    { parts: [{ functionCall: { name: 'f', args: { a: 1 }, id: 'x' } }] },
    { parts: [{ functionResponse: { name: 'f', response: [] } }] },
    { parts: [{ text: 3 }] },
    { role: 'system', parts: [] },
    { parts: 'text' },
    null,
  ];

  it('accept and refuse exactly what the shapes accept and refuse, with the same data', () => {
    for (const sample of samples) {
      const checked = LLMContentShape.check(sample);
      const parsed = LLMContentSchema.safeParse(sample);
      expect(parsed.success).toBe(!(checked instanceof ShapeIssue));
      if (parsed.success) expect(parsed.data).toEqual(checked);
      else expect(parsed.error.issues[0]?.path).toEqual((checked as ShapeIssue).path);
    }
  });

  it('agree on every event payload of the catalog', () => {
    const payloads: Record<string, unknown[]> = {
      functionCallUpdate: [{ callId: 'c', status: null }, { callId: 'c' }, { callId: 'c', status: 'x', opts: { isThought: 'no' } }],
      error: [{ message: 'm', code: 'NOPE' }, { message: 'm', code: 'TIMEOUT' }, { code: 'TIMEOUT' }],
      subagentAddJson: [{ callId: 'c', title: 't' }, { callId: 'c', title: 't', data: [1] }],
      usageMetadata: [{ metadata: { promptTokenCount: 'many' } }, { metadata: { promptTokenCount: 1 } }],
    };
    for (const [type, values] of Object.entries(payloads)) {
      const shape = AGENT_EVENT_PAYLOADS[type as AgentEventType];
      const schema = toZodSchema(shape);
      for (const value of values) {
        const checked = shape.check(value);
        const parsed = schema.safeParse(value);
        expect({ type, value, accepted: parsed.success }).toEqual({ type, value, accepted: !(checked instanceof ShapeIssue) });
        if (parsed.success) expect(parsed.data).toEqual(checked);
      }
    }
  });

  it('are real zod schemas: a result parses and converts to JSON Schema', () => {
    expect(AgentResultSchema.parse({ success: true, href: '/x', kept: 1 })).toEqual({ success: true, href: '/x', kept: 1 });
    expect(AgentResultShape.check({ success: 'yes' })).toBeInstanceOf(ShapeIssue);
  });

  it('are loose zod objects whose JSON Schema declares every field of their shape', () => {
    expect(PartSchema).toBeInstanceOf(z.ZodObject);
    const json = z.toJSONSchema(PartSchema) as { properties: Record<string, unknown>; additionalProperties: unknown };
    const { definition } = PartShape;
    expect(Object.keys(json.properties)).toEqual(Object.keys(definition.kind === 'object' ? definition.properties : {}));
    expect(Object.keys(json.properties)).toContain('functionResponse');
    expect(json.additionalProperties).toEqual({});
    expect(json.properties.inlineData).toMatchObject({ type: 'object', required: ['mimeType', 'data'] });
  });

  it('give copies made before their first use the very same fields', () => {
    // The fields are built when zod first reads them: a copy taken before then must still agree.
    const schema = toZodSchema(LLMContentShape) as unknown as z.ZodObject;
    const described = schema.describe('A content');
    const optional = schema.optional();
    const content = { role: 'model', parts: [{ text: 'hi', later: 1 }] };
    expect(described.parse(content)).toEqual(content);
    expect(optional.parse(undefined)).toBeUndefined();
    expect(schema.safeParse({ parts: [{ text: 1 }] }).error?.issues[0]?.path).toEqual(['parts', 0, 'text']);
    expect((described as z.ZodObject).shape.parts).toBe(schema.shape.parts);
    expect(z.toJSONSchema(described)).toEqual({ ...z.toJSONSchema(schema), description: 'A content' });
  });
});
