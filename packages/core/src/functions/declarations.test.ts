import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import type { FunctionDeclaration } from '../protocol/gemini.js';
import { createHttpDriveOperationsClient } from '../http/index.js';
import type { StartRequest } from '../protocol/requests.js';
import { run } from '../run/index.js';
import { createFakeGoogleDrive, createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, textChunk } from '../testing/index.js';
import { createGoogleDriveGroup, createMemoryGroup, defaultFunctionGroups, defineFunction, toFunctionDeclaration } from './index.js';

interface FunctionFacts {
  group: string;
  params: string[];
  required: string[];
  enums: Record<string, string[]>;
  hasResponseSchema: boolean;
  icon: string | null;
  title: string | null;
}

const FIXTURES = new URL('../../../../fixtures/functions/', import.meta.url);
const FACTS = JSON.parse(readFileSync(new URL('function-facts.json', FIXTURES), 'utf8')) as Record<string, FunctionFacts>;
const DEFAULTS = JSON.parse(readFileSync(new URL('function-defaults.json', FIXTURES), 'utf8')) as Record<string, JsonObject>;

/** Declared by the protocol but not offered by this runtime (they need backends it does not have). */
const NOT_OFFERED = ['generate_html', 'notebooklm_generate_answer', 'notebooklm_retrieve_relevant_chunks'];

/** Offered when the request turns them on: a memory tool segment, the `enableGoogleDriveTools` flag (both need a Drive client). */
const ON_REQUEST = [
  'memory_create_sheet',
  'memory_read_sheet',
  'memory_update_sheet',
  'memory_delete_sheet',
  'memory_get_metadata',
  'google_drive_upload_file',
  'google_drive_create_folder',
];

/** A request that turns on every optional group. */
const EVERYTHING: StartRequest = {
  segments: [{ type: 'text', text: 'Say hi' }, { type: 'tool', path: 'function-group/use-memory', title: 'Use Memory' }],
  flags: { enableGoogleDriveTools: true },
  graph: { url: 'drive:/graph-1', title: 'Graph' },
};

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

/** The declarations of the first request a plain objective (or `request`, with a Drive client) sends. */
async function firstRequestDeclarations(request?: StartRequest): Promise<FunctionDeclaration[]> {
  const backend = createScriptedBackendClient([[functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Hi', href: '/' })]]);
  const fake = createFakeGoogleDrive();
  const drive = createHttpDriveOperationsClient({
    fetch: (input, init) => fake.fetch(new Request(input, init)),
    getAccessToken: () => 'token',
    baseUrls: fake.baseUrls('http://google.test'),
  });
  const ports = request ? { backend, store: createMemoryInteractionStore(), drive } : { backend, store: createMemoryInteractionStore() };
  await collect(run(request ?? { segments: [{ type: 'text', text: 'Say hi' }] }, ports));
  return backend.requests[0]?.body.tools?.[0]?.functionDeclarations ?? [];
}

/** Every object schema inside `schema`, `$defs` included, with where it is. */
function objectSchemas(schema: unknown, path: string): Array<{ path: string; schema: JsonObject }> {
  if (typeof schema !== 'object' || schema === null) return [];
  if (Array.isArray(schema)) return schema.flatMap((item, index) => objectSchemas(item, `${path}[${index}]`));
  const found = (schema as JsonObject).type === 'object' ? [{ path, schema: schema as JsonObject }] : [];
  return [...found, ...Object.entries(schema).flatMap(([key, value]) => objectSchemas(value, `${path}.${key}`))];
}

describe('the declarations the model sees', () => {
  it('offers the built-in functions in the protocol order', async () => {
    const declarations = await firstRequestDeclarations();
    expect(declarations.map((declaration) => declaration.name)).toEqual([
      'system_objective_fulfilled',
      'system_failed_to_fulfill_objective',
      'system_list_files',
      'system_write_file',
      'system_read_text_from_file',
      'system_create_task_tree',
      'system_mark_completed_tasks',
      'generate_text',
      'generate_and_execute_code',
      'generate_images',
      'generate_video',
      'generate_speech_from_text',
      'generate_music_from_text',
      'chat_request_user_input',
      'chat_present_choices',
    ]);
    const offered = new Set(declarations.map((declaration) => declaration.name));
    expect(Object.keys(FACTS).filter((name) => !offered.has(name)).sort()).toEqual([...NOT_OFFERED, ...ON_REQUEST].sort());
  });

  it('offers the memory and google-drive functions after the built-in ones when the request turns them on', async () => {
    const declarations = await firstRequestDeclarations(EVERYTHING);
    expect(declarations.map((declaration) => declaration.name).slice(-9)).toEqual(['chat_request_user_input', 'chat_present_choices', ...ON_REQUEST]);
    const offered = new Set(declarations.map((declaration) => declaration.name));
    expect(Object.keys(FACTS).filter((name) => !offered.has(name)).sort()).toEqual(NOT_OFFERED);
  });

  it('keeps every fact of every declaration: parameters, required, enums, defaults, strictness, response schema', async () => {
    const declarations = await firstRequestDeclarations(EVERYTHING);
    expect(declarations.map((declaration) => declaration.name)).toEqual(expect.arrayContaining(ON_REQUEST));
    expect(declarations.length).toBeGreaterThan(0);
    for (const declaration of declarations) {
      const facts = FACTS[declaration.name];
      expect(facts, declaration.name).toBeDefined();
      if (!facts) continue;
      const parameters = declaration.parametersJsonSchema as JsonObject;
      const properties = parameters.properties as Record<string, JsonObject>;
      const where = (what: string) => `${declaration.name} ${what}`;

      expect(Object.keys(properties).sort(), where('parameters')).toEqual([...facts.params].sort());
      expect([...((parameters.required as string[] | undefined) ?? [])].sort(), where('required')).toEqual([...facts.required].sort());
      const enums = Object.fromEntries(
        Object.entries(properties).flatMap(([name, property]) => (property.enum ? [[name, property.enum]] : [])),
      );
      expect(enums, where('enums')).toEqual(facts.enums);
      const defaults = Object.fromEntries(
        Object.entries(properties).flatMap(([name, property]) => ('default' in property ? [[name, property.default]] : [])),
      );
      expect(defaults, where('defaults')).toEqual(DEFAULTS[declaration.name] ?? {});
      for (const { path, schema } of objectSchemas(parameters, 'parameters')) {
        expect(schema.additionalProperties, where(`${path}.additionalProperties`)).toBe(false);
      }
      expect(declaration.responseJsonSchema !== undefined, where('response schema')).toBe(facts.hasResponseSchema);
      if (declaration.responseJsonSchema) {
        expect(declaration.responseJsonSchema.type, where('response type')).toBe('object');
        expect(declaration.responseJsonSchema.additionalProperties, where('response additionalProperties')).toBe(false);
      }
    }
  });

  it('declares every parameter of the system, generation, media and google-drive functions with the type the protocol gives it', async () => {
    // Strings unless listed; task_tree is the recursive task node.
    const TYPES: Record<string, Record<string, string>> = {
      system_create_task_tree: { task_tree: '#/$defs/TaskNode' },
      system_mark_completed_tasks: { task_ids: 'string[]' },
      generate_text: { search_grounding: 'boolean', maps_grounding: 'boolean', url_context: 'boolean' },
      generate_and_execute_code: { search_grounding: 'boolean' },
      generate_images: { images: 'string[]' },
      generate_video: { images: 'string[]' },
      google_drive_upload_file: { convert: 'boolean' },
    };
    const declarations = (await firstRequestDeclarations(EVERYTHING)).filter((declaration) => /^(system|generate|google_drive)_/.test(declaration.name));
    expect(declarations).toHaveLength(15);
    for (const declaration of declarations) {
      const properties = (declaration.parametersJsonSchema as JsonObject).properties as Record<string, JsonObject>;
      const types = Object.fromEntries(
        Object.entries(properties).map(([name, property]) => [
          name,
          property.$ref ?? (property.type === 'array' ? `${String((property.items as JsonObject).type)}[]` : property.type),
        ]),
      );
      const expected = Object.fromEntries(FACTS[declaration.name]?.params.map((name) => [name, TYPES[declaration.name]?.[name] ?? 'string']) ?? []);
      expect(types, declaration.name).toEqual(expected);
    }
  });

  it('declares the task tree as a recursive task node with its enums', async () => {
    const declaration = (await firstRequestDeclarations()).find((candidate) => candidate.name === 'system_create_task_tree');
    const parameters = declaration?.parametersJsonSchema as JsonObject;
    expect((parameters.properties as JsonObject).task_tree).toMatchObject({ $ref: '#/$defs/TaskNode' });
    const node = (parameters.$defs as Record<string, JsonObject>).TaskNode as JsonObject;
    expect(node.required).toEqual(['task_id', 'description', 'execution_mode', 'status']);
    expect((node.properties as Record<string, JsonObject>).execution_mode?.enum).toEqual(['serial', 'concurrent']);
    expect((node.properties as Record<string, JsonObject>).status?.enum).toEqual(['not_started', 'in_progress', 'complete']);
    expect((node.properties as Record<string, JsonObject>).subtasks?.items).toEqual({ $ref: '#/$defs/TaskNode' });
  });

  it('shows the client the icon and title of each function', async () => {
    for (const group of [...defaultFunctionGroups(), createMemoryGroup(), createGoogleDriveGroup()]) {
      for (const definition of group.functions) {
        const facts = FACTS[definition.name];
        expect({ icon: definition.icon ?? null, title: definition.title ?? null }, definition.name).toEqual({ icon: facts?.icon, title: facts?.title });
      }
    }
    const backend = createScriptedBackendClient([
      [functionCallChunk('system_create_task_tree', { task_tree: { task_id: 'task_001', description: 'Plan', execution_mode: 'serial', status: 'not_started' } })],
      [functionCallChunk('system_failed_to_fulfill_objective', { user_message: 'Cannot', href: '/' })],
    ]);
    const events = await collect(run({ segments: [{ type: 'text', text: 'Plan' }] }, { backend, store: createMemoryInteractionStore() }));
    expect(events.filter((event) => event.type === 'functionCall')).toMatchObject([
      { name: 'system_create_task_tree', icon: 'task', title: 'Creating task tree' },
      { name: 'system_failed_to_fulfill_objective', icon: 'cancel', title: 'Unable to proceed' },
    ]);
  });

  it('computes each declaration once and hands every run the same object', () => {
    for (const group of [...defaultFunctionGroups(), createMemoryGroup(), createGoogleDriveGroup()]) {
      for (const definition of group.functions) expect(toFunctionDeclaration(definition)).toBe(toFunctionDeclaration(definition));
    }
  });

  it('still runs a call that leaves out required fields with defaults, or sends a value outside an enum', async () => {
    const backend = createScriptedBackendClient([
      [functionCallChunk('chat_present_choices', { user_message: 'Pick', choices: [{ id: 'a', label: 'A' }], selection_mode: 'several', layout: 'circle' })],
    ]);
    const events = await collect(run({ segments: [{ type: 'text', text: 'Pick' }] }, { backend, store: createMemoryInteractionStore() }));
    expect(events.at(-1)).toMatchObject({ type: 'waitForChoice', selectionMode: 'single', layout: 'list' });
    const asking = createScriptedBackendClient([[functionCallChunk('chat_request_user_input', { user_message: 'Name?' })]]);
    const asked = await collect(run({ segments: [{ type: 'text', text: 'Ask' }] }, { backend: asking, store: createMemoryInteractionStore() }));
    expect(asked.at(-1)).toMatchObject({ type: 'waitForInput', inputType: 'asterisk' });
  });

  it('tells the model, without asking the user, when its choices are empty or share an id', async () => {
    const backend = createScriptedBackendClient([
      [functionCallChunk('chat_present_choices', { user_message: 'Pick', choices: [], selection_mode: 'single', layout: 'list' })],
      [
        functionCallChunk('chat_present_choices', {
          user_message: 'Pick',
          choices: [
            { id: 'a', label: 'A' },
            { id: 'a', label: 'B' },
          ],
          selection_mode: 'single',
          layout: 'list',
        }),
      ],
      [textChunk('Done.')],
    ]);
    const events = await collect(run({ segments: [{ type: 'text', text: 'Pick' }] }, { backend, store: createMemoryInteractionStore() }));
    expect(events.some((event) => event.type === 'waitForChoice')).toBe(false);
    const errors = backend.requests.slice(1, 3).map((request) => request.body.contents.at(-1)?.parts[0]?.functionResponse?.response);
    expect(errors).toEqual([
      { error: 'choices is empty: give the user at least one option to pick.' },
      { error: 'choices: the id "a" is used twice; give every option its own id.' },
    ]);
  });

  it('declares a user-defined function as parsing accepts it unless it asks for a strict declaration', () => {
    const parameters = z.object({ city: z.string(), unit: z.enum(['c', 'f']).default('c') });
    const loose = toFunctionDeclaration(defineFunction({ name: 'weather', description: 'Weather.', parameters, handler: async () => ({}) }));
    expect(loose.parametersJsonSchema).toEqual({
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'], default: 'c' } },
      required: ['city'],
    });
    const strict = toFunctionDeclaration(
      defineFunction({ name: 'weather_strict', description: 'Weather.', strictDeclaration: true, parameters, handler: async () => ({}) }),
    );
    expect(strict.parametersJsonSchema).toMatchObject({ required: ['city', 'unit'], additionalProperties: false });
  });
});

describe('defineFunction', () => {
  it('refuses a schema that is not a zod 4 object, naming the function and the version it needs', () => {
    const zod3Like = { shape: {}, parse: (value: unknown) => value } as never;
    expect(() => defineFunction({ name: 'legacy', description: 'Old schema.', parameters: zod3Like, handler: async () => ({}) })).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringContaining('defineFunction legacy: parameters must be a zod 4 object schema') }),
    );
  });
});
