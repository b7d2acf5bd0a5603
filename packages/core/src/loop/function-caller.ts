import { formatIssues, messageOf } from '../errors/index.js';
import type { FunctionContext, FunctionDefinition } from '../functions/index.js';
import { isSuspend, type Suspend } from '../functions/index.js';
import type { JsonObject, Part } from '../protocol/content.js';

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

/** Options of a {@link FunctionCaller}. */
export interface FunctionCallerOptions {
  /**
   * Side-effecting calls wait for this before they start: the whole answer is in and journalled
   * first, so a crash can tell a call that ran from one that never started. `false` settles them
   * without running them (their answer broke off and will be asked for again).
   */
  sideEffectGate?: Promise<boolean>;
  /** Told about each call as it settles, in the order they settle. */
  onSettled?(call: CallRecord, outcome: CallOutcome): void;
}

/**
 * Runs the function calls of one model turn. Each call starts as soon as it is parsed; calls
 * whose definition says `parallel: false` wait for every earlier call and hold back later ones.
 * Results are reported in call order, whatever order the handlers finish in.
 */
export class FunctionCaller {
  readonly #definitions: ReadonlyMap<string, FunctionDefinition>;
  readonly #createContext: (call: CallRecord) => FunctionContext;
  readonly #options: FunctionCallerOptions;
  readonly #calls: CallRecord[] = [];
  readonly #tasks: Array<Promise<CallOutcome>> = [];
  /** Settles when the last exclusive call is done; every later call waits for it. */
  #barrier: Promise<unknown> = Promise.resolve();

  constructor(
    definitions: ReadonlyMap<string, FunctionDefinition>,
    createContext: (call: CallRecord) => FunctionContext,
    options: FunctionCallerOptions = {},
  ) {
    this.#definitions = definitions;
    this.#createContext = createContext;
    this.#options = options;
  }

  get size(): number {
    return this.#calls.length;
  }

  /** The calls of the turn so far, in call order. */
  get calls(): readonly CallRecord[] {
    return this.#calls;
  }

  /** Starts `call` now (or after the exclusive calls before it, or after the side-effect gate). */
  call(call: CallRecord): void {
    this.#track(call, (definition) => invokeFunction(definition, call, () => this.#createContext(call)));
  }

  /** Settles `call` with an outcome known without running it (a journalled result). */
  settleWith(call: CallRecord, outcome: CallOutcome): void {
    this.#calls.push(call);
    this.#tasks.push(Promise.resolve(outcome));
  }

  /** Waits for every call (siblings are never cancelled by a suspend) and returns them in order. */
  async settle(): Promise<SettledCall[]> {
    const outcomes = await Promise.all(this.#tasks);
    return outcomes.map((outcome, index) => ({ call: this.#calls[index] as CallRecord, outcome }));
  }

  #track(call: CallRecord, run: (definition: FunctionDefinition | undefined) => Promise<CallOutcome>): void {
    const definition = this.#definitions.get(call.name);
    const exclusive = definition?.parallel === false;
    const before = exclusive ? Promise.allSettled([this.#barrier, ...this.#tasks]) : this.#barrier;
    const gate = definition?.sideEffects === true ? this.#options.sideEffectGate : undefined;
    const task = gate
      ? Promise.all([before, gate]).then(([, open]) => (open ? run(definition) : notRun(call)))
      : before.then(() => run(definition));
    if (exclusive) this.#barrier = task.catch(() => undefined);
    const onSettled = this.#options.onSettled;
    if (onSettled) void task.then((outcome) => onSettled(call, outcome), () => undefined);
    this.#calls.push(call);
    this.#tasks.push(task);
  }
}

/** The outcome of a side-effecting call whose answer broke off before it could start. */
function notRun(call: CallRecord): CallOutcome {
  return { kind: 'response', response: { error: `${call.name} was not run: the answer that asked for it broke off` } };
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
