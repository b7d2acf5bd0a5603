import { formatIssues, messageOf } from '../errors/index.js';
import type { JsonObject, Part } from '../protocol/content.js';
import type { FunctionContext, FunctionDefinition } from '../functions/index.js';
import { isSuspend, type Suspend } from '../functions/index.js';

/** One function call of a model turn, as the loop tracks it. */
export interface CallRecord {
  /** Our id for the call: the provider's id when it sent one, else a fresh UUID. */
  callId: string;
  name: string;
  args: JsonObject;
  /** The provider's own id, echoed on the function response only when present. */
  providerId?: string;
}

/** How one call ended. */
export type CallOutcome =
  | { kind: 'response'; response: JsonObject }
  | { kind: 'fatal'; error: JsonObject }
  | { kind: 'suspend'; suspend: Suspend };

/** A settled call, in call order. */
export interface SettledCall {
  call: CallRecord;
  outcome: CallOutcome;
}

/**
 * Runs the function calls of one model turn. Each call starts as soon as it is parsed; calls
 * whose definition says `parallel: false` wait for every earlier call and hold back later ones.
 * Results are reported in call order, whatever order the handlers finish in.
 */
export class FunctionCaller {
  readonly #definitions: ReadonlyMap<string, FunctionDefinition>;
  readonly #createContext: (call: CallRecord) => FunctionContext;
  readonly #calls: CallRecord[] = [];
  readonly #tasks: Array<Promise<CallOutcome>> = [];
  /** Settles when the last exclusive call is done; every later call waits for it. */
  #barrier: Promise<unknown> = Promise.resolve();

  constructor(
    definitions: ReadonlyMap<string, FunctionDefinition>,
    createContext: (call: CallRecord) => FunctionContext,
  ) {
    this.#definitions = definitions;
    this.#createContext = createContext;
  }

  get size(): number {
    return this.#calls.length;
  }

  /** Starts `call` now (or after the exclusive calls before it). */
  call(call: CallRecord): void {
    const definition = this.#definitions.get(call.name);
    const exclusive = definition?.parallel === false;
    const before = exclusive ? Promise.allSettled([this.#barrier, ...this.#tasks]) : this.#barrier;
    const task = before.then(() => invokeFunction(definition, call, () => this.#createContext(call)));
    if (exclusive) this.#barrier = task.catch(() => undefined);
    this.#calls.push(call);
    this.#tasks.push(task);
  }

  /** Waits for every call (siblings are never cancelled by a suspend) and returns them in order. */
  async settle(): Promise<SettledCall[]> {
    const outcomes = await Promise.all(this.#tasks);
    return outcomes.map((outcome, index) => ({ call: this.#calls[index] as CallRecord, outcome }));
  }
}

/**
 * Runs one call: validates its arguments, runs the precondition and the handler, and says how it
 * ended. Unknown functions, invalid arguments and throws become `{"error"}` responses for the
 * model; a `Suspend` suspends; `{"$error"}` is fatal. The one path every call takes, resumed
 * calls included.
 */
export async function invokeFunction(
  definition: FunctionDefinition | undefined,
  call: CallRecord,
  createContext: () => FunctionContext,
): Promise<CallOutcome> {
  if (!definition) return { kind: 'response', response: { error: `Unknown function: ${call.name}` } };
  const parsed = definition.parameters.safeParse(call.args);
  if (!parsed.success) {
    return { kind: 'response', response: { error: `Invalid arguments for ${call.name}: ${formatIssues(parsed.error.issues)}` } };
  }
  const context = createContext();
  try {
    if (definition.precondition) await definition.precondition(parsed.data, context);
    const response = await definition.handler(parsed.data, context);
    if (Object.hasOwn(response, '$error')) return { kind: 'fatal', error: response };
    return { kind: 'response', response };
  } catch (error) {
    if (isSuspend(error)) return { kind: 'suspend', suspend: error };
    return { kind: 'response', response: { error: messageOf(error) } };
  }
}

/** The `functionResponse` part for a call, echoing the provider's id only when it sent one. */
export function toFunctionResponsePart(call: CallRecord, response: JsonObject): Part {
  return {
    functionResponse:
      call.providerId === undefined
        ? { name: call.name, response }
        : { id: call.providerId, name: call.name, response },
  };
}
