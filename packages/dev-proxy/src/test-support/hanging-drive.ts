// Test-only: the fake Google Drive + Sheets on loopback, recording every request, able to hang one.
import { serve, type RunningServer } from '@org/adapter-node';
import { createFakeGoogleDrive, type FakeGoogleDrive } from '@org/core/testing';

/** A request as the Drive saw it: method, path (as sent) and parsed JSON body. */
export interface DriveCall {
  method: string;
  path: string;
  body: unknown;
}

/** A served fake Drive whose next request matching a rule is applied but never answered. */
export interface HangingDrive {
  url: string;
  fake: FakeGoogleDrive;
  /** Every request, in arrival order, including the hung one. */
  readonly calls: DriveCall[];
  /**
   * The next request matching `matches` takes effect in the fake, and its answer is held back
   * until `close()`: the caller sees a request that never returns. Resolves once it arrived.
   */
  hangNext(matches: (call: DriveCall) => boolean): Promise<DriveCall>;
  close(): Promise<void>;
}

export async function startHangingDrive(accessToken: string): Promise<HangingDrive> {
  const fake = createFakeGoogleDrive({ accessToken });
  const calls: DriveCall[] = [];
  const held: Array<() => void> = [];
  let rule: { matches: (call: DriveCall) => boolean; arrived: (call: DriveCall) => void } | undefined;
  const server: RunningServer = await serve({
    handler: async (request) => {
      const url = new URL(request.url);
      const text = await request.clone().text();
      let body: unknown = text;
      try {
        body = text.length > 0 ? JSON.parse(text) : undefined;
      } catch {
        // Kept as text (a multipart upload).
      }
      const call: DriveCall = { method: request.method, path: url.pathname, body };
      calls.push(call);
      const response = await fake.fetch(request);
      if (rule?.matches(call)) {
        const { arrived } = rule;
        rule = undefined;
        arrived(call);
        return new Promise<Response>((resolve) => held.push(() => resolve(response)));
      }
      return response;
    },
  });
  return {
    url: server.url,
    fake,
    calls,
    hangNext: (matches) => new Promise<DriveCall>((arrived) => (rule = { matches, arrived })),
    close: async () => {
      for (const release of held.splice(0)) release();
      await server.close();
    },
  };
}
