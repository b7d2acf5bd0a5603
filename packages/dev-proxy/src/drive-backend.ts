import { serve, type RunningServer } from '@org/adapter-node';
import type { AgentPorts, DriveOperationsClient } from '@org/core';
import { createHttpDriveOperationsClient, readDriveBaseUrls, type DriveBaseUrls } from '@org/core/http';
import { createFakeGoogleDrive } from '@org/core/testing';

/** Where the dev server's runs keep memory, usually read from the environment by {@link readDriveBackendConfig}. */
export interface DriveBackendConfig {
  /** The Drive and Sheets APIs to call with the caller's token (a gateway, a fake). Default: Google's, or the simulated one. */
  baseUrls?: DriveBaseUrls;
}

/** How runs of the dev server reach Google Drive and Sheets. */
export interface DriveBackend {
  /** `simulated`: an in-memory fake served on loopback; `custom`: the configured base URLs; `google`: Google's APIs. */
  mode: 'simulated' | 'custom' | 'google';
  /** The simulated Drive's origin, when it runs. */
  url?: string;
  /** The Drive client for one request: bound to the caller's token (any token, or none, for the simulated one). */
  driveFor(accessToken: string | undefined): DriveOperationsClient | undefined;
  /** Adds the Drive client for the request's caller to ports built without one. */
  withDrive(ports: AgentPorts, accessToken: string | undefined): AgentPorts;
  /** The banner line that says where memory lives. */
  bannerLine: string;
  close(): Promise<void>;
}

/** Options of {@link startDriveBackend}. */
export interface DriveBackendOptions {
  config?: DriveBackendConfig;
  /** The model is simulated and nothing upstream is configured: memory is simulated too, unless base URLs are set. */
  simulated: boolean;
  /** The `fetch` the Drive client uses. */
  fetch: typeof fetch;
  /** Port of the simulated Drive. Default: a free one. */
  port?: number;
}

/** The token the simulated Drive is called with when the caller sent none: it takes any. */
const SIMULATED_TOKEN = 'simulated';

/**
 * Reads the Drive settings of the dev server from environment variables: `GOOGLE_API_BASE_URL`
 * (one origin for Drive, Drive upload and Sheets), or `DRIVE_BASE_URL`, `DRIVE_UPLOAD_BASE_URL`,
 * `SHEETS_BASE_URL`. Throws a `BAD_REQUEST` naming a variable that is not an http(s) URL.
 *
 * @example
 * ```ts
 * const drive = readDriveBackendConfig(process.env);
 * ```
 */
export function readDriveBackendConfig(env: Readonly<Record<string, string | undefined>>): DriveBackendConfig {
  const baseUrls = readDriveBaseUrls(env);
  return baseUrls ? { baseUrls } : {};
}

/**
 * Starts what the dev server's runs use for memory: with base URLs, a client for them bound to
 * each caller's token; else, when the model is simulated, a fake Drive + Sheets served on loopback
 * (in memory, gone when the server stops); else Google's APIs with the caller's token.
 *
 * @example
 * ```ts
 * const drive = await startDriveBackend({ simulated: true, fetch });
 * const ports = drive.withDrive({ backend, store }, accessToken);
 * ```
 */
export async function startDriveBackend(options: DriveBackendOptions): Promise<DriveBackend> {
  const baseUrls = options.config?.baseUrls;
  let server: RunningServer | undefined;
  let mode: DriveBackend['mode'];
  let urls: DriveBaseUrls | undefined = baseUrls;
  if (baseUrls) {
    mode = 'custom';
  } else if (options.simulated) {
    mode = 'simulated';
    const fake = createFakeGoogleDrive();
    server = await serve({ handler: (request) => fake.fetch(request), port: options.port ?? 0 });
    urls = fake.baseUrls(server.url);
  } else {
    mode = 'google';
  }
  const clientFor = (token: string): DriveOperationsClient =>
    createHttpDriveOperationsClient({ fetch: options.fetch, getAccessToken: () => token, ...(urls ? { baseUrls: urls } : {}) });
  const driveFor = (accessToken: string | undefined): DriveOperationsClient | undefined => {
    if (mode === 'simulated') return clientFor(accessToken ?? SIMULATED_TOKEN);
    return accessToken ? clientFor(accessToken) : undefined;
  };
  const bannerLine =
    mode === 'simulated'
      ? `Memory:    SIMULATED Google Drive + Sheets at ${server?.url} (in memory, cleared when the server stops; set GOOGLE_API_BASE_URL to use another)`
      : mode === 'custom'
        ? `Memory:    Drive + Sheets at ${displayOrigin(urls?.drive ?? urls?.sheets ?? '')}, with the caller's token`
        : "Memory:    Google Drive + Sheets with the caller's token (runs without a token have no memory)";
  return {
    mode,
    ...(server ? { url: server.url } : {}),
    driveFor,
    withDrive(ports, accessToken) {
      if (ports.drive) return ports;
      const drive = driveFor(accessToken);
      return drive ? { ...ports, drive } : ports;
    },
    bannerLine,
    close: async () => {
      await server?.close();
    },
  };
}

/** An origin fit for the banner: no credentials, no path or query. */
function displayOrigin(raw: string): string {
  try {
    return new URL(raw).origin;
  } catch {
    return '(not a URL)';
  }
}
