import { z } from 'zod';
import type { AgentFileSystem, TaskTreeManager } from '../agent-fs/index.js';
import { AgentError } from '../errors/index.js';
import type { SheetManager } from '../memory/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';
import type { FunctionDeclaration } from '../protocol/gemini.js';
import { fixedJson } from '../protocol/fixed-json.js';

/** What a handler receives besides its arguments. */
export interface FunctionContext {
  /** The id of this call, as the events name it. */
  callId: string;
  /** Aborts when the run is cancelled. */
  signal: AbortSignal;
  fs: AgentFileSystem;
  taskTree: TaskTreeManager;
  ports: AgentPorts;
  model: string;
  /** Consents the user granted in this run (e.g. `GET_ANY_WEBPAGE`). */
  consentsGranted: ReadonlySet<string>;
  /** The run's flags (e.g. `googleOne`, `useNotebookLM`). */
  flags: Readonly<Record<string, unknown>>;
  /** The graph the run belongs to, when the client sent one. */
  graph?: { url?: string; title?: string };
  /**
   * The graph's memory (a spreadsheet of sheets the agent keeps), when the objective carries a
   * memory tool and a Drive client is present.
   */
  memory?: SheetManager;
  /**
   * Attaches progress details (sources, executed code, ...) to this call's `functionResult`
   * event as `metadata`. They are for the app: the model never sees them.
   */
  reportMetadata(metadata: JsonObject): void;
  /** Shows a status for this call (`functionCallUpdate`); `null` clears it. */
  update(status: string | null, options?: { expectedDurationInSec?: number; isThought?: boolean }): void;
  /** Ends the run with `result` once the current turn is done (termination functions). */
  terminate(result: AgentResult): void;
}

/** A function the model can call. */
export interface FunctionDefinition<P extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  /** Arguments, validated before the handler runs; invalid ones go back to the model as an error. */
  parameters: P;
  /** Shape of the handler's result, sent as `responseJsonSchema`. */
  response?: z.ZodType;
  /**
   * `true`: the declaration describes the arguments as the handler receives them, which is how the
   * built-in functions are declared. A field with a `.default()` is declared required (its default
   * shown), a field with a `.prefault()` required without a default, and every object refuses
   * unknown fields (`additionalProperties: false`). Parsing is unchanged: a call that leaves such a
   * field out still runs with the default. Default `false`: the declaration describes what parsing
   * accepts, so defaulted fields are optional.
   */
  strictDeclaration?: boolean;
  /** Icon and title the client shows for the call. */
  icon?: string;
  title?: string;
  /** `false`: never runs at the same time as another call of the turn. Default `true`. */
  parallel?: boolean;
  /**
   * `true` when a call changes something outside the run (sends a message, writes a sheet, charges
   * a card). When a run is recovered after a crash, such a call that was in flight is reported to
   * the model as interrupted instead of being run again; other calls are simply run again. A
   * side-effecting call starts only once the model's whole answer is in (and, when the run keeps
   * checkpoints, recorded), and never when that answer broke off and is asked for again.
   * Default `false`.
   */
  sideEffects?: boolean;
  /** Runs before the handler; may throw a `Suspend` with `precondition: true` (consent). */
  precondition?(args: z.output<P>, context: FunctionContext): Promise<void>;
  /**
   * Does the work. A throw becomes `{"error": message}` for the model; a result of
   * `{"$error": message, "code"?: ErrorCode}` ends the run with that message (code `INTERNAL`
   * unless one of the closed codes is given).
   */
  handler(args: z.output<P>, context: FunctionContext): Promise<JsonObject>;
  /** Turns the client's answer to this call's suspend into the function response (default: as sent). */
  resume?(response: JsonObject, context: FunctionContext): Promise<JsonObject>;
}

/** A named set of functions with the instruction that explains them to the model. */
export interface FunctionGroup {
  name: string;
  instruction?: string;
  functions: FunctionDefinition[];
}

/**
 * Declares a function with typed arguments.
 *
 * @example
 * ```ts
 * const getWeather = defineFunction({
 *   name: 'get_weather',
 *   description: 'Current weather for a city.',
 *   parameters: z.object({ city: z.string() }),
 *   handler: async ({ city }) => ({ city, tempC: 21 }),
 * });
 * ```
 */
export function defineFunction<P extends z.ZodObject>(definition: FunctionDefinition<P>): FunctionDefinition {
  const parameters = definition.parameters as unknown;
  // A zod 3 schema (from `zod/v3`, or a second zod install) has no `_zod`: say so now, not mid-run.
  if (typeof parameters !== 'object' || parameters === null || !('_zod' in parameters)) {
    throw new AgentError(
      'BAD_REQUEST',
      `defineFunction ${definition.name}: parameters must be a zod 4 object schema (z.object from 'zod' ^4.0.0); zod 3 schemas are not supported`,
      { details: { function: definition.name } },
    );
  }
  return definition as unknown as FunctionDefinition;
}

const declarations = new WeakMap<FunctionDefinition, FunctionDeclaration>();

/**
 * The Gemini declaration of a function (JSON Schema parameters and, when the definition has one, the
 * response), computed once per definition and shared by every run that uses it. It is frozen: its
 * JSON is kept with it, so requests do not serialise it again (copy it to change it).
 */
export function toFunctionDeclaration(definition: FunctionDefinition): FunctionDeclaration {
  const cached = declarations.get(definition);
  if (cached) return cached;
  const declaration: FunctionDeclaration = {
    name: definition.name,
    description: definition.description,
    parametersJsonSchema: jsonSchemaOf(definition.parameters, definition.strictDeclaration === true ? 'output' : 'input'),
  };
  if (definition.response) declaration.responseJsonSchema = jsonSchemaOf(definition.response, 'output');
  const fixed = fixedJson(declaration);
  declarations.set(definition, fixed);
  return fixed;
}

function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonObject;
  return rest;
}
