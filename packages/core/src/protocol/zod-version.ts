import { z } from 'zod';
import { AgentError } from '../errors/agent-error.js';

/** The zod versions `@org/core` works with (its peer dependency range). */
export const SUPPORTED_ZOD_RANGE = '^4.0.0';

/**
 * Fails with a clear `AgentError` when the installed zod is not one `@org/core` works with, rather
 * than a `TypeError` deep inside a schema. zod is a peer dependency: the app's zod is ours.
 */
export function assertSupportedZod(): void {
  const version = (z as { core?: { version?: { major: number; minor: number; patch: number } } }).core?.version;
  if (version?.major === 4 && typeof z.looseObject === 'function' && typeof z.toJSONSchema === 'function') return;
  const found = version ? `${version.major}.${version.minor}.${version.patch}` : '3.x or older';
  throw new AgentError(
    'INTERNAL',
    `@org/core needs zod ${SUPPORTED_ZOD_RANGE} (a peer dependency), but the zod it loaded is ${found}: install zod 4 (npm install zod@^4)`,
    { details: { zodFound: found, zodSupported: SUPPORTED_ZOD_RANGE } },
  );
}
