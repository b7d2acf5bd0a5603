import { AgentError } from '@org/core';

/** Headers that describe one connection, never forwarded (RFC 9110 §7.6.1), plus `host`. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
];

/**
 * Request headers the proxy sets itself: `fetch` computes the length of the streamed body and
 * asks for the encodings it can decode.
 */
const REQUEST_ONLY = ['content-length', 'accept-encoding', 'expect'];

/**
 * Response headers that no longer match the body: `fetch` has already decoded a compressed answer,
 * so the encoding and the length of the encoded bytes are dropped with it.
 */
const RESPONSE_ONLY = ['content-encoding', 'content-length'];

/** Options of {@link createReverseProxy}. */
export interface ReverseProxyOptions {
  /**
   * The only place requests go, e.g. `https://backend.example.com` or `https://host/api` (every
   * request path is then appended to `/api`). It may not hold credentials: each caller's own
   * `Authorization` is forwarded.
   */
  upstreamUrl: string;
  /** The fetch that reaches the upstream, e.g. `createNodeFetch()` from `@org/adapter-node`. */
  fetch: typeof fetch;
  /** The upstream must answer with headers within this many ms, else 504. Default 120 000. */
  headersTimeoutMs?: number;
}

const DEFAULT_HEADERS_TIMEOUT_MS = 120_000;

/**
 * A Web handler that forwards each request to one upstream and streams the answer back: method,
 * path, query, headers and bodies both ways, statuses and redirects as they are. It reaches
 * nothing but the upstream's origin under its path: a path that could mean something else to
 * another server (`//host`, `.` or `..` segments, percent-encoded `.`, `/`, `\` or `%`, control
 * characters, or any of these once decoded and look-alikes folded) is refused with 400. Hop-by-hop
 * headers, including those named in `Connection`, are dropped both ways. An unreachable upstream is a 502 naming its origin.
 *
 * @example
 * ```ts
 * const proxy = createReverseProxy({ upstreamUrl: 'https://backend.example.com', fetch: createNodeFetch() });
 * const response = await proxy(new Request('http://localhost:8080/v1beta1/getSettings'));
 * ```
 */
export function createReverseProxy(options: ReverseProxyOptions): (request: Request) => Promise<Response> {
  const upstream = parseUpstream(options.upstreamUrl);
  const prefix = upstream.pathname.replace(/\/+$/, '');
  const headersTimeoutMs = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  return async (request) => {
    const url = new URL(request.url);
    const problem = unsafePath(url.pathname);
    if (problem) return errorJson(new AgentError('BAD_REQUEST', `${url.pathname.slice(0, 200)}: ${problem}; the proxy forwards plain paths only`, { details: { path: '(request target)' } }));
    const target = new URL(`${upstream.origin}${prefix}${url.pathname}${url.search}`);
    if (target.origin !== upstream.origin || target.pathname !== `${prefix}${url.pathname}`) {
      return errorJson(new AgentError('BAD_REQUEST', `${url.pathname.slice(0, 200)}: does not stay under the upstream path`));
    }
    const headers = withoutHopByHop(request.headers, REQUEST_ONLY);
    const controller = new AbortController();
    const stop = (): void => controller.abort(request.signal.reason);
    request.signal.addEventListener('abort', stop, { once: true });
    const timer = setTimeout(() => controller.abort(new AgentError('TIMEOUT', 'headers timeout')), headersTimeoutMs);
    const hasBody = request.method !== 'GET' && request.method !== 'HEAD' && request.body !== null;
    let answer: Response;
    try {
      answer = await options.fetch(target, {
        method: request.method,
        headers,
        redirect: 'manual',
        signal: controller.signal,
        ...(hasBody ? { body: request.body, duplex: 'half' } : {}),
      } as RequestInit);
    } catch (error) {
      request.signal.removeEventListener('abort', stop);
      if (controller.signal.reason instanceof AgentError) {
        return errorJson(new AgentError('TIMEOUT', `Upstream ${upstream.origin} sent no answer within ${headersTimeoutMs} ms`));
      }
      return errorJson(new AgentError('UPSTREAM_ERROR', `Upstream ${upstream.origin} is unreachable: ${reasonOf(error)}`));
    } finally {
      clearTimeout(timer);
    }
    const body = answer.body;
    if (body === null) request.signal.removeEventListener('abort', stop);
    return new Response(body, {
      status: answer.status,
      statusText: answer.statusText,
      headers: withoutHopByHop(answer.headers, RESPONSE_ONLY),
    });
  };
}

function parseUpstream(upstreamUrl: string): URL {
  let upstream: URL;
  try {
    upstream = new URL(upstreamUrl);
  } catch {
    throw new AgentError('BAD_REQUEST', 'UPSTREAM_URL is not a URL; expected e.g. https://backend.example.com');
  }
  if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:') {
    throw new AgentError('BAD_REQUEST', `UPSTREAM_URL must be http: or https:, got ${upstream.protocol}`);
  }
  if (upstream.username || upstream.password) {
    throw new AgentError('BAD_REQUEST', "UPSTREAM_URL may not hold credentials; the proxy forwards each caller's own Authorization");
  }
  if (upstream.search || upstream.hash) {
    throw new AgentError('BAD_REQUEST', 'UPSTREAM_URL may not hold a query or a fragment; give the origin and an optional path prefix');
  }
  return upstream;
}

/** Why a path may not be forwarded, or `undefined` when it is a plain path. */
function unsafePath(pathname: string): string | undefined {
  if (!pathname.startsWith('/') || pathname.startsWith('//')) return 'the path must start with a single "/"';
  const segments = pathname.slice(1).split('/');
  for (let index = 0; index < segments.length; index += 1) {
    const segment = segments[index] as string;
    if (segment === '' && index < segments.length - 1) return 'the path holds an empty segment ("//")';
    if (segment === '.' || segment === '..') return 'the path holds a "." or ".." segment';
    if (/%(?:2e|2f|5c|25|00)/i.test(segment)) return 'the path holds a percent-encoded ".", "/", "\\", "%" or NUL';
    // Control characters, backslashes and `;` (which some servers read as a path parameter, `..;`).
    if (/[\u0000-\u001f\u007f\\;]/.test(segment)) return 'the path holds a control character, "\\" or ";"';
    // The same checks on what a server sees that decodes the segment, folds look-alikes (a full-width
    // dot, U+FF0E, is "." under NFKC or a best-fit code page) or trims spaces.
    const decoded = decodedSegment(segment);
    if (decoded === undefined) return 'the path holds a "%" that is not UTF-8 percent-encoding';
    const folded = decoded.normalize('NFKC');
    if (folded.trim() === '.' || folded.trim() === '..') return 'the path holds a segment that decodes to "." or ".."';
    if (/[\u0000-\u001f\u007f/\\;%]/.test(folded)) return 'the path holds a segment that decodes to a control character, "/", "\\", ";" or "%"';
  }
  return undefined;
}

function decodedSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** A copy of `source` without hop-by-hop headers, those `Connection` names, and `extra`. */
function withoutHopByHop(source: Headers, extra: readonly string[]): Headers {
  const headers = new Headers(source);
  const listed = (source.get('connection') ?? '').split(',').map((name) => name.trim().toLowerCase());
  for (const name of [...HOP_BY_HOP, ...extra, ...listed]) if (name) headers.delete(name);
  return headers;
}

function errorJson(error: AgentError): Response {
  return new Response(JSON.stringify(error.toJSON()), {
    status: error.status,
    headers: { 'content-type': 'application/json; charset=utf-8' },
  });
}

/** The short reason of a failed fetch (`ECONNREFUSED`), which undici keeps in `cause.code`. */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  return error instanceof Error ? error.name : 'unknown error';
}
