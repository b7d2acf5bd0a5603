import { parseSseStream } from '@org/core';

/** One wire event: `{ "<type>": payload }`. */
export type WireEvent = Record<string, Record<string, unknown>>;

/** Reads an SSE response to the end and returns its wire events. */
export async function wireEvents(response: Response): Promise<WireEvent[]> {
  if (!response.body) throw new Error(`response ${response.status} has no body`);
  const events: WireEvent[] = [];
  for await (const event of parseSseStream(response.body)) events.push(JSON.parse(event.data) as WireEvent);
  return events;
}

/** The type of each wire event, in order. */
export function typesOf(events: readonly WireEvent[]): string[] {
  return events.map((event) => Object.keys(event)[0] ?? '');
}

/** A POST to the agent endpoint with a JSON body. */
export function agentRequest(body: unknown, headers: Record<string, string> = {}): Request {
  return new Request('https://agent.test/v1beta1/streamRunAgent?alt=sse', {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/** The same POST from a caller that did not ask for SSE, so request errors come back as JSON. */
export function agentJsonRequest(body: unknown, headers: Record<string, string> = {}): Request {
  return new Request('https://agent.test/v1beta1/streamRunAgent', {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/** A string of `size` characters mixing ASCII, two-, three- and four-byte UTF-8 sequences. */
export function mixedText(size: number): string {
  const unit = 'interaction state ✓ héllo 中文 😀 ';
  return unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
}
