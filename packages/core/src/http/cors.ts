import { AgentError } from '../errors/index.js';

/** Which other origins a browser may call a handler from (Cross-Origin Resource Sharing). */
export interface CorsOptions {
  /**
   * Origins allowed to call from a browser page, as exact origins (`https://app.example.com`), or
   * `'*'` for any. Requests from the server's own host are always allowed; a request whose
   * `Origin` is not allowed is refused with 403 before anything runs.
   */
  origins: '*' | readonly string[];
  /** Let pages send cookies and read responses with them (`Access-Control-Allow-Credentials`). Default false. */
  credentials?: boolean;
  /** How long a browser may reuse a preflight answer, in seconds. Default 600. */
  maxAgeSeconds?: number;
  /** Methods a preflight allows; `'*'` allows whatever the browser asks for. Default: the handler's own. */
  allowMethods?: '*' | readonly string[];
  /** Request headers a preflight allows; `'*'` allows whatever the browser asks for. Default: the handler's own. */
  allowHeaders?: '*' | readonly string[];
}

/** The CORS rules of one handler, applied to each request. */
export interface CorsPolicy {
  /** A 403 for a request whose `Origin` may not call, else `undefined`. */
  refuse(request: Request): Response | undefined;
  /** Whether the request is a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`). */
  isPreflight(request: Request): boolean;
  /** The answer to a preflight: 204 with what is allowed, or 403 for a refused origin. */
  preflight(request: Request): Response;
  /** The response with the CORS headers this request's origin needs (the same object when none). */
  decorate(request: Request, response: Response): Response;
}

const DEFAULT_MAX_AGE_SECONDS = 600;

/**
 * Builds the CORS rules of a handler. With no options only same-origin pages may call it; the
 * defaults for methods and headers are the handler's own.
 */
export function createCorsPolicy(
  options: CorsOptions | undefined,
  defaults: { methods: readonly string[]; headers: readonly string[] },
): CorsPolicy {
  const origins = options?.origins ?? [];
  const credentials = options?.credentials ?? false;
  const maxAge = String(options?.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS);
  const methods = options?.allowMethods ?? defaults.methods;
  const headers = options?.allowHeaders ?? defaults.headers;

  /** `undefined`: no CORS involved (no `Origin`, or the server's own host). */
  const crossOrigin = (request: Request): { origin: string; allowed: boolean } | undefined => {
    const origin = request.headers.get('origin');
    if (origin === null || isSameHost(origin, request.url)) return undefined;
    return { origin, allowed: origins === '*' || origins.includes(origin) };
  };

  const allowOrigin = (target: Headers, origin: string): void => {
    if (origins === '*' && !credentials) {
      target.set('access-control-allow-origin', '*');
    } else {
      target.set('access-control-allow-origin', origin);
      appendVary(target, 'Origin');
    }
    if (credentials) target.set('access-control-allow-credentials', 'true');
  };

  const refusal = (origin: string): Response => {
    const error = new AgentError('FORBIDDEN', `Origin ${origin.slice(0, 200)} may not call this server; add it to the allowed CORS origins`, {
      details: { origin: origin.slice(0, 200) },
    });
    return new Response(JSON.stringify(error.toJSON()), {
      status: error.status,
      headers: { 'content-type': 'application/json; charset=utf-8', vary: 'Origin' },
    });
  };

  return {
    refuse(request) {
      const cross = crossOrigin(request);
      return cross && !cross.allowed ? refusal(cross.origin) : undefined;
    },
    isPreflight(request) {
      return request.method === 'OPTIONS' && request.headers.has('access-control-request-method');
    },
    preflight(request) {
      const cross = crossOrigin(request);
      if (cross && !cross.allowed) return refusal(cross.origin);
      const answer = new Headers({ vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' });
      allowOrigin(answer, request.headers.get('origin') ?? '*');
      const askedMethod = request.headers.get('access-control-request-method') ?? '';
      const askedHeaders = request.headers.get('access-control-request-headers') ?? '';
      answer.set('access-control-allow-methods', methods === '*' ? askedMethod || 'GET, POST' : [...methods, 'OPTIONS'].join(', '));
      const allowedHeaders = headers === '*' ? askedHeaders : headers.join(', ');
      if (allowedHeaders) answer.set('access-control-allow-headers', allowedHeaders);
      answer.set('access-control-max-age', maxAge);
      // A public page calling a server on the user's machine (Chrome's private network access).
      if (request.headers.get('access-control-request-private-network') === 'true') {
        answer.set('access-control-allow-private-network', 'true');
      }
      return new Response(null, { status: 204, headers: answer });
    },
    decorate(request, response) {
      const cross = crossOrigin(request);
      if (!cross || !cross.allowed) return response;
      const decorated = new Headers(response.headers);
      allowOrigin(decorated, cross.origin);
      return new Response(response.body, { status: response.status, statusText: response.statusText, headers: decorated });
    },
  };
}

/**
 * Wraps a Web handler with CORS: answers preflights, refuses calls from origins that are not
 * allowed with 403, and adds the `Access-Control-*` headers to every response an allowed origin
 * gets (streams included).
 *
 * @example
 * ```ts
 * const handler = withCors(proxy, { origins: ['https://app.example.com'], allowMethods: '*', allowHeaders: '*' });
 * ```
 */
export function withCors(handler: (request: Request) => Promise<Response>, options: CorsOptions): (request: Request) => Promise<Response> {
  const policy = createCorsPolicy(options, { methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], headers: ['content-type', 'authorization'] });
  return async (request) => {
    if (policy.isPreflight(request)) return policy.preflight(request);
    const refused = policy.refuse(request);
    if (refused) return refused;
    return policy.decorate(request, await handler(request));
  };
}

/**
 * Whether `origin` names the host the request was sent to. The scheme is not compared, so a
 * server behind a TLS-terminating proxy (plain `http` inside, `https` outside) still sees its own
 * pages as same-origin. A page elsewhere cannot make the browser send another site's host, but a
 * domain re-pointed at the server's address (DNS rebinding) sends its own: a server on a
 * developer's machine refuses hosts it does not know (adapter-node's `allowedHosts`).
 */
function isSameHost(origin: string, requestUrl: string): boolean {
  try {
    return new URL(origin).host === new URL(requestUrl).host;
  } catch {
    return false;
  }
}

function appendVary(headers: Headers, value: string): void {
  const current = headers.get('vary');
  if (!current) headers.set('vary', value);
  else if (!current.toLowerCase().split(/\s*,\s*/).includes(value.toLowerCase())) headers.set('vary', `${current}, ${value}`);
}
