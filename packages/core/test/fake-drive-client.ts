import { createHttpDriveOperationsClient, type HttpDriveOperationsClientOptions } from '../src/http/index.js';
import type { DriveOperationsClient } from '../src/ports/index.js';
import { createFakeGoogleDrive, type FakeGoogleDrive } from '../src/testing/index.js';

/**
 * The fake Google Drive, served to the real HTTP Drive client of a user whose token is `token`:
 * one attempt per call unless `options` say otherwise.
 */
export function fakeDriveClient(token: string, options: Partial<HttpDriveOperationsClientOptions> = {}): { fake: FakeGoogleDrive; drive: DriveOperationsClient } {
  const fake = createFakeGoogleDrive({ accessToken: token });
  const drive = createHttpDriveOperationsClient({
    fetch: (input, init) => fake.fetch(new Request(input, init)),
    getAccessToken: () => token,
    baseUrls: fake.baseUrls('http://google.test'),
    retry: { maxAttempts: 1 },
    ...options,
  });
  return { fake, drive };
}
