/**
 * A small, dependency-free description of JSON shapes: the one source of truth for the wire
 * events and contents of the protocol. The browser client validates events with these checks
 * (a few hundred bytes instead of a schema library); the server builds its zod schemas from the
 * same descriptions (`zod-schemas.ts`), so both sides accept exactly the same payloads.
 *
 * A check never copies a valid value: objects are returned as they came, unknown fields and all.
 * Only a field declared with {@link dropInvalid} can make a check return a changed copy.
 */

import { describeType, isPlainObject } from './values.js';

/** A problem found by a check: where (path from the checked value) and what. */
export class ShapeIssue {
  readonly path: PropertyKey[] = [];
  constructor(readonly message: string) {}
}

/** What a shape describes, for code that turns shapes into other validators (zod). */
export type ShapeDefinition =
  | { kind: 'string' | 'number' | 'boolean' | 'unknown' }
  | { kind: 'literal'; value: string }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'optional' | 'nullable' | 'dropInvalid' | 'array' | 'record'; inner: Shape<unknown> }
  | { kind: 'object'; properties: Readonly<Record<string, Shape<unknown>>> };

/** A JSON shape whose values have type `T`. */
export interface Shape<T> {
  readonly definition: ShapeDefinition;
  /** The value (the same object when nothing was dropped), or the first issue. */
  check(value: unknown): T | ShapeIssue;
}

/** The type of the values a shape accepts. */
export type Infer<S> = S extends Shape<infer T> ? T : never;

type Properties = Readonly<Record<string, Shape<unknown>>>;
type OptionalKeys<P extends Properties> = {
  [K in keyof P]: P[K] extends OptionalShape<unknown> ? K : never;
}[keyof P];
type Flatten<T> = { [K in keyof T]: T[K] } & {};

/** The type of a loose object: the declared fields, plus any other field as `unknown`. */
export type InferObject<P extends Properties> = Flatten<
  { -readonly [K in Exclude<keyof P, OptionalKeys<P>>]: Infer<P[K]> } & {
    -readonly [K in OptionalKeys<P>]?: Infer<P[K]> | undefined;
  } & { [key: string]: unknown }
>;

/** A shape whose field may be left out. */
export interface OptionalShape<T> extends Shape<T | undefined> {
  readonly optional: true;
}

function expected(what: string, value: unknown): ShapeIssue {
  return new ShapeIssue(`expected ${what}, got ${describeType(value)}`);
}

function primitive<T>(kind: 'string' | 'number' | 'boolean'): Shape<T> {
  return {
    definition: { kind },
    check: (value) => (typeof value === kind && (kind !== 'number' || Number.isFinite(value)) ? (value as T) : expected(kind, value)),
  };
}

/** Any string. */
export const string = (): Shape<string> => primitive('string');
/** Any finite number. */
export const number = (): Shape<number> => primitive('number');
/** `true` or `false`. */
export const boolean = (): Shape<boolean> => primitive('boolean');

/** Anything, including nothing (so an object field of this shape may be left out). */
export function unknown(): OptionalShape<unknown> {
  return { definition: { kind: 'unknown' }, optional: true, check: (value) => value };
}

/** Exactly `value`. */
export function literal<const T extends string>(value: T): Shape<T> {
  return {
    definition: { kind: 'literal', value },
    check: (input) => (input === value ? value : expected(JSON.stringify(value), input)),
  };
}

/** One of `values`. */
export function enumOf<const T extends readonly string[]>(values: T): Shape<T[number]> {
  return {
    definition: { kind: 'enum', values },
    check: (input) =>
      typeof input === 'string' && values.includes(input) ? input : expected(`one of ${values.map((value) => `"${value}"`).join(', ')}`, input),
  };
}

/** `inner`, or absent (`undefined`). */
export function optional<T>(inner: Shape<T>): OptionalShape<T> {
  return { definition: { kind: 'optional', inner }, optional: true, check: (value) => (value === undefined ? undefined : inner.check(value)) };
}

/** `inner`, or `null`. */
export function nullable<T>(inner: Shape<T>): Shape<T | null> {
  return { definition: { kind: 'nullable', inner }, check: (value) => (value === null ? null : inner.check(value)) };
}

/**
 * An optional field whose invalid value reads as absent instead of failing the whole object: for
 * values a newer server may extend (an error code this client does not know yet).
 */
export function dropInvalid<T>(inner: Shape<T>): OptionalShape<T> {
  return {
    definition: { kind: 'dropInvalid', inner },
    optional: true,
    check: (value) => {
      const result = inner.check(value);
      return result instanceof ShapeIssue ? undefined : result;
    },
  };
}

function withKey<T>(result: T | ShapeIssue, key: PropertyKey): T | ShapeIssue {
  if (result instanceof ShapeIssue) result.path.unshift(key);
  return result;
}

/** An array whose every item fits `item`. */
export function array<T>(item: Shape<T>): Shape<T[]> {
  return {
    definition: { kind: 'array', inner: item },
    check: (value) => {
      if (!Array.isArray(value)) return expected('array', value);
      let copy: unknown[] | undefined;
      for (let index = 0; index < value.length; index += 1) {
        const result = item.check(value[index]);
        if (result instanceof ShapeIssue) return withKey(result, index);
        if (result !== value[index]) (copy ??= value.slice())[index] = result;
      }
      return (copy ?? value) as T[];
    },
  };
}

/** A JSON object with string keys whose every value fits `inner`. */
export function record<T>(inner: Shape<T>): Shape<Record<string, T>> {
  return {
    definition: { kind: 'record', inner },
    check: (value) => {
      if (!isPlainObject(value)) return expected('object', value);
      if (inner.definition.kind === 'unknown') return value as Record<string, T>;
      let copy: Record<string, unknown> | undefined;
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        const result = inner.check(value[key]);
        if (result instanceof ShapeIssue) return withKey(result, key);
        if (result !== value[key]) (copy ??= { ...value })[key] = result;
      }
      return (copy ?? value) as Record<string, T>;
    },
  };
}

/**
 * A loose object: the declared fields must fit their shapes, any other field passes through
 * untouched (a field a newer server adds is kept, byte for byte after re-serialisation).
 */
export function looseObject<const P extends Properties>(properties: P): Shape<InferObject<P>> {
  const keys = Object.keys(properties);
  return {
    definition: { kind: 'object', properties },
    check: (value) => {
      if (!isPlainObject(value)) return expected('object', value);
      let copy: Record<string, unknown> | undefined;
      for (const key of keys) {
        const field = value[key];
        const result = (properties[key] as Shape<unknown>).check(field);
        if (result instanceof ShapeIssue) return withKey(result, key);
        if (result !== field) {
          copy ??= { ...value };
          if (result === undefined) delete copy[key];
          else copy[key] = result;
        }
      }
      return (copy ?? value) as InferObject<P>;
    },
  };
}
