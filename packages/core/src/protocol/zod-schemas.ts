import { z } from 'zod';
import { AgentError } from '../errors/agent-error.js';
import type { Shape } from './shape.js';
import { assertSupportedZod } from './zod-version.js';

assertSupportedZod();

/**
 * The zod schema of a shape: the server validates with zod what the browser client checks with
 * the shape itself, from one description. Loose objects stay loose; `dropInvalid` fields become
 * `.optional().catch(undefined)`.
 */
export function toZodSchema<T>(shape: Shape<T>): z.ZodType<T> {
  return build(shape) as unknown as z.ZodType<T>;
}

function build(shape: Shape<unknown>): z.ZodType {
  const definition = shape.definition;
  switch (definition.kind) {
    case 'string':
      return z.string();
    case 'number':
      return z.number();
    case 'boolean':
      return z.boolean();
    case 'unknown':
      return z.unknown();
    case 'literal':
      return z.literal(definition.value);
    case 'enum':
      return z.enum(definition.values as [string, ...string[]]);
    case 'optional':
      return build(definition.inner).optional();
    case 'nullable':
      return build(definition.inner).nullable();
    case 'dropInvalid':
      return build(definition.inner).optional().catch(undefined);
    case 'array':
      return z.array(build(definition.inner));
    case 'record':
      return z.record(z.string(), build(definition.inner));
    case 'object': {
      const properties: Record<string, z.ZodType> = {};
      // An `unknown` field may be left out, as its type says (zod alone would require the key).
      for (const [key, value] of Object.entries(definition.properties)) {
        properties[key] = value.definition.kind === 'unknown' ? z.unknown().optional() : build(value);
      }
      return z.looseObject(properties);
    }
    default:
      throw new AgentError('INTERNAL', `no zod schema for shape kind "${(definition as { kind: string }).kind}"`);
  }
}
