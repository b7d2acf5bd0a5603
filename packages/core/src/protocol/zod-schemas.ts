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
      // Each field is a getter that builds its schema on first read: zod reads an object's fields
      // once, the first time it needs them (a parse, a JSON Schema), and keeps what the getters
      // returned. So the public schemas cost one object each when core is imported, and what zod
      // finds when it looks is the same as if every field had been built at once.
      const properties: Record<string, z.ZodType> = {};
      for (const [key, value] of Object.entries(definition.properties)) {
        let field: z.ZodType | undefined;
        Object.defineProperty(properties, key, { enumerable: true, configurable: true, get: () => (field ??= fieldOf(value)) });
      }
      return z.looseObject(properties);
    }
    default:
      throw new AgentError('INTERNAL', `no zod schema for shape kind "${(definition as { kind: string }).kind}"`);
  }
}

/** The schema of an object field. An `unknown` field may be left out, as its type says (zod alone would require the key). */
function fieldOf(shape: Shape<unknown>): z.ZodType {
  return shape.definition.kind === 'unknown' ? z.unknown().optional() : build(shape);
}
