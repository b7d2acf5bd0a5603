import { AgentError } from '../errors/index.js';
import type { DriveBaseUrls } from './http-drive-operations-client.js';

/**
 * The Drive and Sheets base URLs named by settings (environment variables, Worker bindings), or
 * `undefined` when none is set. `GOOGLE_API_BASE_URL` is one origin serving all three APIs the way
 * a gateway or the fake of `@org/core/testing` does (`<base>/drive/v3`, `<base>/upload/drive/v3`,
 * `<base>/v4`); `DRIVE_BASE_URL`, `DRIVE_UPLOAD_BASE_URL` and `SHEETS_BASE_URL` set one API each
 * and win over it. Empty values count as unset. A value that is not an http(s) URL is a
 * `BAD_REQUEST` naming the setting (its value is never repeated: it may hold credentials).
 *
 * @example
 * ```ts
 * const baseUrls = readDriveBaseUrls({ GOOGLE_API_BASE_URL: 'http://127.0.0.1:9100' });
 * const drive = createHttpDriveOperationsClient({ fetch, getAccessToken: () => token, ...(baseUrls ? { baseUrls } : {}) });
 * ```
 */
export function readDriveBaseUrls(settings: Readonly<Record<string, unknown>>): DriveBaseUrls | undefined {
  const value = (name: string): string | undefined => {
    const raw = settings[name];
    if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return undefined;
    let url: URL | undefined;
    try {
      url = typeof raw === 'string' ? new URL(raw.trim()) : undefined;
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new AgentError('BAD_REQUEST', `${name} must be an http(s) URL such as http://127.0.0.1:9100`, { details: { setting: name } });
    }
    return (raw as string).trim().replace(/\/+$/, '');
  };
  const base = value('GOOGLE_API_BASE_URL');
  const baseUrls: DriveBaseUrls = base ? { drive: `${base}/drive/v3`, upload: `${base}/upload/drive/v3`, sheets: `${base}/v4` } : {};
  const drive = value('DRIVE_BASE_URL');
  const upload = value('DRIVE_UPLOAD_BASE_URL');
  const sheets = value('SHEETS_BASE_URL');
  if (drive) baseUrls.drive = drive;
  if (upload) baseUrls.upload = upload;
  if (sheets) baseUrls.sheets = sheets;
  return Object.keys(baseUrls).length > 0 ? baseUrls : undefined;
}
