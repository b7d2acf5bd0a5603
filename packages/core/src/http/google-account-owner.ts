import { AgentError } from '../errors/index.js';
import { digestOwner } from './agent-handler.js';
import { readLimitedText } from './providers/provider-transport.js';

/** Options of {@link createGoogleAccountOwner}. */
export interface GoogleAccountOwnerOptions {
  /** The `fetch` Google is asked with. Default: the global `fetch`. */
  fetch?: typeof globalThis.fetch;
  /** Google's token information endpoint (a fake in tests). Default {@link GOOGLE_TOKEN_INFO_URL}. */
  tokenInfoUrl?: string;
  /**
   * OAuth client ids whose tokens are taken (`aud` or `azp` of the token). Default: any; set it so
   * a token issued to another application is refused.
   */
  audiences?: readonly string[];
  /** How long Google's answer about a token is reused, at most (never past the token's expiry). Default 10 minutes. */
  cacheMs?: number;
  /** How many tokens' answers are kept at most; the oldest give way. Default 10 000. */
  maxEntries?: number;
  /** How long to wait for Google's answer. Default 10 000 ms. */
  timeoutMs?: number;
  /**
   * What becomes of a token Google does not vouch for (it refuses it, it was issued to another
   * application, or Google cannot be reached): `'refuse'` (default) fails the request, with
   * `UNAUTHENTICATED` or `UPSTREAM_ERROR`; `'token'` makes the token its own owner, as the
   * default owner does, for a development server whose callers' tokens may be made up.
   */
  unverified?: 'refuse' | 'token';
}

/** Where Google tells who an access token belongs to. */
export const GOOGLE_TOKEN_INFO_URL = 'https://www.googleapis.com/oauth2/v3/tokeninfo';

const DEFAULT_CACHE_MS = 10 * 60 * 1000;
const DEFAULT_MAX_ENTRIES = 10_000;
const DEFAULT_TIMEOUT_MS = 10_000;
/** Most bytes of Google's answer read. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** How long a token Google did not vouch for stays its own owner before Google is asked again. */
const UNVERIFIED_CACHE_MS = 60 * 1000;

/** What Google says of a token (the fields used here). */
interface TokenInfo {
  sub?: unknown;
  aud?: unknown;
  azp?: unknown;
  exp?: unknown;
}

/**
 * A `resolveOwner` for Google OAuth access tokens: a run belongs to the Google account that started
 * it (`google:<sub>`), not to the token. The browser's tokens expire within the hour and the Opal
 * client sends a fresh one, so with the default owner (a digest of the token) a run the user comes
 * back to later would be refused; with this one the same account resumes it with any of its tokens,
 * and another account is still refused. Google is asked once per token (answers are cached until
 * the token expires, at most `cacheMs`); a token Google refuses is `UNAUTHENTICATED`, and when
 * Google cannot be asked the request fails with `UPSTREAM_ERROR` rather than guess (unless
 * `unverified: 'token'`).
 *
 * @example
 * ```ts
 * const handler = createAgentHandler({ createPorts, resolveOwner: createGoogleAccountOwner({ audiences: [clientId] }) });
 * ```
 */
export function createGoogleAccountOwner(options: GoogleAccountOwnerOptions = {}): (accessToken: string | undefined) => Promise<string | undefined> {
  const fetchGoogle = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const url = options.tokenInfoUrl ?? GOOGLE_TOKEN_INFO_URL;
  const cacheMs = options.cacheMs ?? DEFAULT_CACHE_MS;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const unverified = options.unverified ?? 'refuse';
  /** By digest of the token (tokens themselves are not kept): the owner, until when. */
  const known = new Map<string, { owner: string; until: number }>();
  /** Questions to Google in flight, so concurrent requests with one token ask once. */
  const asking = new Map<string, Promise<string>>();

  const remember = (key: string, owner: string, until: number): string => {
    known.set(key, { owner, until });
    while (known.size > maxEntries) known.delete(known.keys().next().value as string);
    return owner;
  };

  const ask = async (accessToken: string, key: string): Promise<string> => {
    try {
      return await verify(accessToken, key);
    } catch (error) {
      if (unverified === 'refuse') throw error;
      // Google did not vouch for the token: it is its own owner (for a while, so a network that
      // does not reach Google costs one wait per token, not one per request).
      return remember(key, key, Date.now() + Math.min(cacheMs, UNVERIFIED_CACHE_MS));
    }
  };

  const verify = async (accessToken: string, key: string): Promise<string> => {
    let response: Response;
    let text: string;
    try {
      response = await fetchGoogle(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `access_token=${encodeURIComponent(accessToken)}`,
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await readLimitedText(response, MAX_ANSWER_BYTES);
    } catch {
      // The cause is left out: it may quote the request.
      throw new AgentError('UPSTREAM_ERROR', 'Could not ask Google who the access token belongs to; try again');
    }
    if (response.status === 400 || response.status === 401) {
      throw new AgentError('UNAUTHENTICATED', 'Google does not accept the access token (expired or revoked); sign in again');
    }
    let info: TokenInfo | undefined;
    try {
      info = response.ok ? (JSON.parse(text) as TokenInfo) : undefined;
    } catch {
      info = undefined;
    }
    if (!info || typeof info !== 'object') {
      throw new AgentError('UPSTREAM_ERROR', `Google answered ${response.status} when asked who the access token belongs to; try again`);
    }
    if (options.audiences && !options.audiences.some((audience) => audience === info.aud || audience === info.azp)) {
      throw new AgentError('UNAUTHENTICATED', 'The access token was issued to another application');
    }
    // A token that names no account (no `sub`) belongs to itself, as with the default owner.
    const owner = typeof info.sub === 'string' && info.sub.length > 0 && info.sub.length <= 255 ? `google:${info.sub}` : key;
    const expires = Number(info.exp) * 1000;
    const now = Date.now();
    return remember(key, owner, Number.isFinite(expires) ? Math.min(expires, now + cacheMs) : now + cacheMs);
  };

  return async (accessToken) => {
    const key = await digestOwner(accessToken);
    if (accessToken === undefined || key === undefined) return undefined;
    const hit = known.get(key);
    if (hit && hit.until > Date.now()) return hit.owner;
    if (hit) known.delete(key);
    let pending = asking.get(key);
    if (!pending) {
      pending = ask(accessToken, key).finally(() => asking.delete(key));
      asking.set(key, pending);
    }
    return pending;
  };
}
