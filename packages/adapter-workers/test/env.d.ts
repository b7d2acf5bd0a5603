import type { InteractionStoreObject, SessionObject } from '../src/index.js';

declare global {
  namespace Cloudflare {
    interface GlobalProps {
      mainModule: typeof import('./worker.js');
    }
    interface Env {
      INTERACTIONS: DurableObjectNamespace<InteractionStoreObject>;
      INTERACTIONS_KV_BACKED: DurableObjectNamespace<InteractionStoreObject>;
      INTERACTIONS_KV: KVNamespace;
      SESSIONS: DurableObjectNamespace<SessionObject>;
      SESSIONS_KV_BACKED: DurableObjectNamespace<SessionObject>;
      SCRIPTED_SESSIONS: DurableObjectNamespace<SessionObject>;
      MEMORY_SESSIONS: DurableObjectNamespace<SessionObject>;
      GEMINI_API_KEY?: string;
      GOOGLE_API_BASE_URL?: string;
    }
  }
}
export {};
