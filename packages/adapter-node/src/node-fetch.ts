import { createRequire } from 'node:module';

/** Options of {@link createNodeFetch}. */
export interface NodeFetchOptions {
  /**
   * Most sockets per origin. Default: no limit, so model streams never queue behind each other
   * (a run waiting minutes for a slow answer must not hold up a fresh one).
   */
  connections?: number;
  /** How long an idle socket stays open, in ms. Default 30 000. */
  keepAliveTimeout?: number;
  /**
   * How long opening a connection (TCP, and TLS for `https:`) may take, in ms, before the request
   * fails (`TypeError: fetch failed`, cause code `UND_ERR_CONNECT_TIMEOUT`). `0`: no limit. Default 10 000.
   */
  connectTimeout?: number;
  /**
   * How long the answer's status and headers may take once the request is sent, in ms, before the
   * request fails (cause code `UND_ERR_HEADERS_TIMEOUT`). `0`: no limit. Default 300 000.
   */
  headersTimeout?: number;
  /**
   * How long the answer's body may go without a byte, in ms, before reading it fails (cause code
   * `UND_ERR_BODY_TIMEOUT`): a gap between two bytes, not the whole body, so a long stream with
   * regular events is never cut. `0`: no limit. Default 300 000.
   */
  bodyTimeout?: number;
}

/** The options of {@link NodeFetchOptions} passed to undici's agent as they are. */
const TIMEOUT_OPTIONS = ['connectTimeout', 'headersTimeout', 'bodyTimeout'] as const;

/**
 * A standard `fetch` backed by one pooled keep-alive undici agent, with `close()` to release it:
 * later requests fail, requests still waiting for an answer or reading one fail with `TypeError`
 * (cause: `This fetch was closed`), and every socket is closed. It resolves once they are, even
 * when a server stalls or an answer is never read to its end.
 */
export type NodeFetch = typeof fetch & { close(): Promise<void> };

type Undici = typeof import('undici');

/** The two parts of undici this fetch uses. */
interface UndiciParts {
  Agent: Undici['Agent'];
  fetch: Undici['fetch'];
}

// undici is a CommonJS package: `require` loads it as it is, where `import()` would first scan
// its sources for their export names (about 20 ms of CPU on Node 22 and 50 ms on Node 20).
const require = createRequire(import.meta.url);

/**
 * Loads undici's agent and its fetch, and nothing else. The package's entry point also loads its
 * mocks, proxy agents, cache, WebSocket and EventSource, and wakes Node's own copy of undici: by
 * the end of a first request, 111 of its modules against 42 this way, and about 170 against
 * 100 ms of CPU on Node 20. The dependency is pinned to one version, so these paths do not move
 * under us; the tests send requests through them.
 */
function loadUndici(): UndiciParts {
  return {
    Agent: require('undici/lib/dispatcher/agent.js') as Undici['Agent'],
    fetch: (require('undici/lib/web/fetch/index.js') as { fetch: Undici['fetch'] }).fetch,
  };
}

/**
 * Creates the `fetch` the ports use in Node: undici with a pooled keep-alive agent, so every model
 * request of a run reuses warm connections. undici is loaded on the first request, so a process
 * that never sends one (or imports this package only for its server) does not pay for loading it.
 *
 * A request with a body does not follow redirects unless its `redirect` says so: an API call that
 * is redirected fails (`TypeError: fetch failed`) instead of carrying its key headers and body to
 * another address, and undici need not keep a copy of every body in case one must be sent again.
 * Requests without a body (downloads) follow redirects as usual.
 *
 * @example
 * ```ts
 * const fetch = createNodeFetch();
 * const backend = createGeminiBackendClient({ apiKey, fetch });
 * ```
 */
export function createNodeFetch(options: NodeFetchOptions = {}): NodeFetch {
  // Checked here, not by undici on the first request, where a typo would fail some later model call.
  const timeouts: Partial<Record<(typeof TIMEOUT_OPTIONS)[number], number>> = {};
  for (const name of TIMEOUT_OPTIONS) {
    const value = options[name];
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 0) throw new RangeError(`${name} must be a whole number of milliseconds of at least 0, got ${value}`);
    timeouts[name] = value;
  }
  let undici: UndiciParts | undefined;
  let agent: InstanceType<Undici['Agent']> | undefined;
  let closed = false;
  const pooled = async (input: Parameters<typeof fetch>[0], init?: RequestInit): Promise<Response> => {
    if (closed) throw new TypeError('fetch failed', { cause: new Error('This fetch was closed') });
    const loaded = (undici ??= loadUndici());
    agent ??= new loaded.Agent({
      ...(options.connections === undefined ? {} : { connections: options.connections }),
      keepAliveTimeout: options.keepAliveTimeout ?? 30_000,
      ...timeouts,
    });
    const request = { ...init, dispatcher: agent } as NonNullable<Parameters<Undici['fetch']>[1]>;
    if (init?.body != null && init.redirect === undefined) {
      request.redirect = 'error';
      // No window, no redirect to follow: undici sends the body as it is rather than a copy of it.
      request.window = null;
    }
    const response = await loaded.fetch(input as Parameters<Undici['fetch']>[0], request);
    return response as unknown as Response;
  };
  const close = async (): Promise<void> => {
    closed = true;
    // Not `agent.close()`, which waits for every request in flight to end: a stalled answer, or a
    // body nobody reads to its end, would hold it for good.
    await agent?.destroy(new Error('This fetch was closed'));
  };
  return Object.assign(pooled as unknown as typeof fetch, { close });
}
