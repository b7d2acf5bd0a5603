/**
 * Values the runtime builds once and sends with every model request (function declarations, the
 * system instruction, the generation config), each kept with its JSON text. A fixed value is
 * frozen all the way down, so its text stays true for as long as it lives, and a request body
 * that carries it is written without serialising it again: with the default function groups that
 * part is about 25 KB, written twice per turn by a served run (the model request and the
 * `sendRequest` event).
 */
const texts = new WeakMap<object, string>();

/**
 * A fixed copy of `value`: parsed from its JSON text and frozen, so it is exactly what the text
 * says. `value` itself is left as it is (it may share objects with a schema or its caller).
 */
export function fixedJson<T>(value: T): T {
  const text = JSON.stringify(value);
  const copy = deepFreeze(JSON.parse(text) as unknown);
  if (typeof copy === 'object' && copy !== null) texts.set(copy, text);
  return copy as T;
}

/**
 * Fixes a container built here (an array or plain object) whose members are fixed values or
 * plain numbers, strings, booleans and nulls: it is frozen in place and its text joined from its
 * members' texts, without serialising them again. Any other member is a mistake of the caller.
 */
export function fixedFrom<T extends object>(value: T): T {
  if (!texts.has(value)) texts.set(value, joinedText(value));
  return value;
}

function joinedText(value: object): string {
  let text: string;
  if (Array.isArray(value)) {
    text = '[';
    for (let index = 0; index < value.length; index += 1) text += `${index > 0 ? ',' : ''}${memberText(value[index])}`;
    text += ']';
  } else {
    text = '{';
    for (const key of Object.keys(value)) {
      const member = (value as Record<string, unknown>)[key];
      if (member === undefined) continue;
      text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${memberText(member)}`;
    }
    text += '}';
  }
  Object.freeze(value);
  return text;
}

function memberText(member: unknown): string {
  const text =
    typeof member === 'object' && member !== null
      ? texts.get(member)
      : member === null || typeof member === 'string' || typeof member === 'number' || typeof member === 'boolean'
        ? JSON.stringify(member)
        : undefined;
  if (text === undefined) throw new TypeError('fixedFrom: a member is neither fixed nor a primitive');
  return text;
}

/** Whether `value` is fixed: frozen all the way down, with its text kept. */
export function isFixed(value: unknown): boolean {
  return typeof value === 'object' && value !== null && texts.has(value);
}

/** The JSON text of `value`: kept for a fixed value, else `JSON.stringify`. */
function jsonOf(value: unknown): string | undefined {
  if (typeof value === 'object' && value !== null) {
    const known = texts.get(value);
    if (known !== undefined) return known;
  }
  return JSON.stringify(value) as string | undefined;
}

/**
 * What `JSON.stringify(object)` gives for a plain object, with fixed values among its fields
 * written from their kept texts. For request bodies, whose fixed parts are most of their size.
 * `given` supplies the text of other field values, by identity: a request's messages joined from
 * texts kept per content.
 */
export function fieldsJson(object: object, given?: ReadonlyMap<unknown, string>): string {
  let text = '{';
  for (const key of Object.keys(object)) {
    const value = (object as Record<string, unknown>)[key];
    const json = given?.get(value) ?? jsonOf(value);
    if (json === undefined) continue;
    text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${json}`;
  }
  return `${text}}`;
}

function deepFreeze(value: unknown): unknown {
  if (typeof value === 'object' && value !== null) {
    for (const member of Object.values(value)) deepFreeze(member);
    Object.freeze(value);
  }
  return value;
}
