import type { InteractionStoreObject } from '../src/index.js';

declare global {
  namespace Cloudflare {
    interface GlobalProps {
      mainModule: typeof import('./worker.js');
    }
    interface Env {
      INTERACTIONS: DurableObjectNamespace<InteractionStoreObject>;
      INTERACTIONS_KV_BACKED: DurableObjectNamespace<InteractionStoreObject>;
      INTERACTIONS_KV: KVNamespace;
      GEMINI_API_KEY?: string;
      GOOGLE_API_BASE_URL?: string;
    }
  }
}
export {};
