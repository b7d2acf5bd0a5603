import { AgentError, isAgentError, toAgentError } from '../errors/index.js';
import { decodeSafely } from '../protocol/values.js';

// Keeps secrets and server file paths out of error messages made from text we do not control
// (a provider's error body, a network error naming a URL, an unexpected exception).

const REDACTED = '[redacted]';

/** Shapes of credentials that are recognisable on their own, wherever they appear. */
const SECRET_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  // `Authorization: Bearer <token>` / `Basic <credentials>`, echoed back or quoted in a message.
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{4,}/gi, `$1 ${REDACTED}`],
  // Google API keys and OAuth access tokens.
  [/\bAIza[0-9A-Za-z_-]{20,}/g, REDACTED],
  [/\bya29\.[0-9A-Za-z_.-]+/g, REDACTED],
  // Credentials inside a URL: scheme://user:password@host.
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@'"]+@/gi, `$1${REDACTED}@`],
  // Keys and tokens passed as query or form parameters, or quoted bare (`invalid token=...`).
  [
    /((?:^|[?&\s;,('"])(?:key|api[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|token|auth|sig|signature|password|client[_-]?secret)=)[^&\s#'";,)]+/gi,
    `$1${REDACTED}`,
  ],
  // Header lines such as `x-goog-api-key: ...`, and fields of an echoed request or token answer
  // such as `"authorization":"..."` or `"refresh_token": "..."`.
  [
    /((?:x-goog-api-key|x-api-key|api-key|authorization|cookie|proxy-authorization|access[_-]token|refresh[_-]token|id[_-]token|client[_-]secret)["']?\s*[:=]\s*["']?)[^\s"',};)&]+/gi,
    `$1${REDACTED}`,
  ],
];

/**
 * Replaces every known secret value and every recognisable credential in `text` with
 * `[redacted]`. Secrets shorter than four characters are ignored (they would mangle the text).
 */
export function redactSecrets(text: string, secrets: ReadonlyArray<string | undefined> = []): string {
  let result = text;
  for (const secret of secrets) {
    if (secret === undefined || secret.length < 4) continue;
    result = result.split(secret).join(REDACTED);
    // The same value as it appears percent-encoded in a URL.
    const encoded = encodeURIComponent(secret);
    if (encoded !== secret) result = result.split(encoded).join(REDACTED);
  }
  for (const [pattern, replacement] of SECRET_PATTERNS) result = result.replace(pattern, replacement);
  return result;
}

/** The secrets a URL carries itself: its user name, password and credential-like query values. */
export function secretsOfUrl(url: string | undefined): string[] {
  if (!url) return [];
  try {
    const parsed = new URL(url);
    const secrets = [parsed.username, parsed.password].map((value) => decodeSafely(value));
    parsed.searchParams.forEach((value, name) => {
      if (/^(?:key|api[_-]?key|access[_-]?token|token|auth|sig|signature|password)$/i.test(name)) secrets.push(value);
    });
    return secrets.filter((value) => value.length > 0);
  } catch {
    return [];
  }
}

/** A URL fit for a message: credentials and secret query values replaced. */
export function redactUrl(url: string): string {
  return redactSecrets(url, secretsOfUrl(url));
}

/** JSON-like details with every string redacted; only used on the error path. */
export function redactDetails<T>(value: T, secrets: ReadonlyArray<string | undefined>): T {
  if (value === undefined) return value;
  try {
    return JSON.parse(redactSecrets(JSON.stringify(value), secrets.map((secret) => (secret === undefined ? undefined : jsonInner(secret))))) as T;
  } catch {
    return value;
  }
}

/**
 * A message of an unexpected failure, fit to leave the server: secrets redacted and absolute file
 * paths (POSIX, Windows and `file:` URLs) replaced by `[path]`.
 */
export function redactServerMessage(text: string): string {
  return redactSecrets(text)
    .replace(/file:\/\/\/?[^\s'"`)]+/gi, '[path]')
    .replace(/(^|[\s'"`(=:])(?:[A-Za-z]:\\|\\\\)[^\s'"`)]*/g, '$1[path]')
    .replace(/(^|[\s'"`(=])\/(?:[^\s'"`)/]+\/)+[^\s'"`)]*/g, '$1[path]');
}

/** How a string looks inside a JSON string literal (quotes and escapes as `JSON.stringify` writes them). */
function jsonInner(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

/** The error a caller may see: an `AgentError` as it is, anything else `INTERNAL` without secrets or server paths. */
export function publicError(error: unknown): AgentError {
  if (isAgentError(error)) return error;
  const normalised = toAgentError(error);
  return new AgentError(normalised.code, redactServerMessage(normalised.message), { cause: error });
}
