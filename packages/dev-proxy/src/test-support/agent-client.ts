// Test-only: a client of the agent endpoint over real HTTP that reads the SSE events as they come.

/** One event as it arrives on the wire: `{ <type>: { ...fields } }`. */
export type WireEvent = Record<string, Record<string, unknown>>;

/** How a request is authenticated: the body's `accessToken`, `Authorization: Bearer`, or neither. */
export type Credential = { bodyToken: string } | { bearer: string } | undefined;

/** POSTs a start or resume body to `/v1beta1/streamRunAgent?alt=sse`. */
export function postRun(url: string, body: Record<string, unknown>, credential?: Credential, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  let sent = body;
  if (credential && 'bearer' in credential) headers.authorization = `Bearer ${credential.bearer}`;
  if (credential && 'bodyToken' in credential) sent = { ...body, accessToken: credential.bodyToken };
  return fetch(`${url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers, body: JSON.stringify(sent), ...(signal ? { signal } : {}) });
}

/** The resume body of the protocol: the interaction and the user's answer (none for a paused run). */
export function resumeBody(interactionId: string, answer?: string): Record<string, unknown> {
  return { resume: { interactionId, response: answer === undefined ? {} : { input: { role: 'user', parts: [{ text: answer }] } } } };
}

/**
 * Reads the events of an SSE response as they arrive, calling `onEvent` for each; resolves with
 * all of them when the stream ends (or rejects when it is aborted).
 */
export async function readEvents(response: Response, onEvent?: (event: WireEvent, all: WireEvent[]) => void): Promise<WireEvent[]> {
  const events: WireEvent[] = [];
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) !== -1) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = block
        .split('\n')
        .filter((text) => text.startsWith('data: '))
        .map((text) => text.slice(6))
        .join('\n');
      if (data.length === 0) continue;
      const event = JSON.parse(data) as WireEvent;
      events.push(event);
      onEvent?.(event, events);
    }
  }
  return events;
}

/** The type of a wire event (its only key). */
export const typeOf = (event: WireEvent | undefined): string | undefined => (event ? Object.keys(event)[0] : undefined);

/** Polls `condition` until it holds (returns a truthy value), or fails after `timeoutMs` naming `what`. */
export async function waitFor<T>(what: string, condition: () => T | Promise<T>, timeoutMs = 60_000, everyMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
