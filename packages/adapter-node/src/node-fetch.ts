import { Agent, fetch as undiciFetch } from 'undici';

/** Options of {@link createNodeFetch}. */
export interface NodeFetchOptions {
  /**
   * Most sockets per origin. Default: no limit, so model streams never queue behind each other
   * (a run waiting minutes for a slow answer must not hold up a fresh one).
   */
  connections?: number;
  /** How long an idle socket stays open, in ms. Default 30 000. */
  keepAliveTimeout?: number;
}

/** A standard `fetch` backed by one pooled keep-alive undici agent, with `close()` to release it. */
export type NodeFetch = typeof fetch & { close(): Promise<void> };

/**
 * Creates the `fetch` the ports use in Node: undici with a pooled keep-alive agent, so every model
 * request of a run reuses warm connections.
 *
 * @example
 * ```ts
 * const fetch = createNodeFetch();
 * const backend = createGeminiBackendClient({ apiKey, fetch });
 * ```
 */
export function createNodeFetch(options: NodeFetchOptions = {}): NodeFetch {
  const agent = new Agent({
    ...(options.connections === undefined ? {} : { connections: options.connections }),
    keepAliveTimeout: options.keepAliveTimeout ?? 30_000,
  });
  const pooled = (input: Parameters<typeof fetch>[0], init?: RequestInit) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as object), dispatcher: agent } as Parameters<typeof undiciFetch>[1]);
  return Object.assign(pooled as unknown as typeof fetch, { close: () => agent.close() });
}
