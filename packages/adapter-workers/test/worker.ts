import type { BackendClient } from '@org/core';
import { createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { createHandler, createSessionObject, InteractionStoreObject, SessionObject } from '../src/index.js';
import { playMemoryScenario } from './memory-scenario.js';

/** The same object class, bound in test/wrangler.jsonc as a key-value-backed (non-SQLite) class. */
export class KeyValueBackedInteractionStoreObject extends InteractionStoreObject {}

/** The session object on the key-value storage backend, for the session log's conformance suite. */
export class KeyValueBackedSessionObject extends SessionObject {}

/** Prompts and answers the scripted model of {@link ScriptedSessionObject} reacts to. */
export const SCRIPT = {
  /** A prompt whose run thinks until it is cancelled. */
  thinkForever: 'Think for a long time',
  /** Text (in the prompt) that makes the first model request of the run hang until its object is reset; `<marker>` follows it. */
  hangOncePrefix: 'Hang once ',
  /** The KV key set when a model request of the run tagged `tag` is cancelled through its signal. */
  abortedKey: (tag: string) => `aborted:${tag}`,
} as const;

/**
 * A model that asks for a name, then greets whoever answered; thinks without end for
 * {@link SCRIPT.thinkForever}; never answers its first request for a prompt with
 * {@link SCRIPT.hangOncePrefix}`<marker>` (recorded in KV as `hung:<marker>`), and behaves from then on.
 * Records in KV when a request of a run is cancelled, so tests see that a cancel reached the model.
 */
function scriptedModel(env: Cloudflare.Env): BackendClient {
  const scripted = createScriptedBackendClient(
    async (request) => {
      const text = JSON.stringify(request.body.contents);
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      const hang = new RegExp(`${SCRIPT.hangOncePrefix}([\\w-]+)`).exec(text)?.[1];
      if (hang !== undefined && (await env.INTERACTIONS_KV.get(`hung:${hang}`)) === null) {
        await env.INTERACTIONS_KV.put(`hung:${hang}`, '1');
        await new Promise(() => {});
      }
      if (typeof answer === 'string') {
        return [thoughtChunk('Greeting'), functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })];
      }
      if (text.includes(SCRIPT.thinkForever)) return Array.from({ length: 100_000 }, (_, index) => thoughtChunk(`Step ${index}`));
      return [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })];
    },
    { chunkDelayMs: 10 },
  );
  return {
    ...scripted,
    streamGenerateContent(model, body, signal) {
      const tag = /tag ([\w-]+)/.exec(JSON.stringify(body.contents))?.[1];
      if (tag !== undefined) {
        signal?.addEventListener('abort', () => void env.INTERACTIONS_KV.put(SCRIPT.abortedKey(tag), '1'), { once: true });
      }
      return scripted.streamGenerateContent(model, body, signal);
    },
  };
}

/** Session objects with the scripted model, short leases, a quick liveness check and quick keep-alives. */
export const ScriptedSessionObject = createSessionObject<Cloudflare.Env>({
  sessionNamespace: (env) => env.SCRIPTED_SESSIONS,
  createBackend: (env) => scriptedModel(env),
  runOptions: () => ({ leaseMs: 1_000 }),
  livenessMs: 200,
  keepAliveMs: 250,
});

/** Session objects whose model plays the memory scenario; Drive is the default client built from the caller's token. */
export const MemorySessionObject = createSessionObject<Cloudflare.Env>({
  sessionNamespace: (env) => env.MEMORY_SESSIONS,
  createBackend: () => createScriptedBackendClient(playMemoryScenario),
});

export { InteractionStoreObject, SessionObject };

/** The Worker exactly as the README shows it: default ports from env. */
export default createHandler();
