import type { AgentEvent, AgentEventOf, AgentEventType } from '../protocol/events.js';

/** One handler per event type, each receiving its own typed event; `any` sees every event first. */
export type AgentEventHandlers = {
  [T in AgentEventType]?: (event: AgentEventOf<T>) => void | Promise<void>;
} & { any?: (event: AgentEvent) => void | Promise<void> };

/**
 * Routes each event of `events` to its handler, in order, awaiting each handler. Resolves when
 * the events end; rejects with what the iterable or a handler threw.
 *
 * @example
 * ```ts
 * await dispatchAgentEvents(run.events, {
 *   thought: (event) => log(event.text),
 *   waitForInput: (event) => showForm(event.prompt),
 * });
 * ```
 */
export async function dispatchAgentEvents(events: AsyncIterable<AgentEvent>, handlers: AgentEventHandlers): Promise<void> {
  for await (const event of events) {
    await handlers.any?.(event);
    const handler = handlers[event.type] as ((event: AgentEvent) => void | Promise<void>) | undefined;
    await handler?.(event);
  }
}
