import type { createMemoryEventBus, createMemorySessionLog } from '@org/core/testing';

// The session ports of `@org/core` (`SessionLog`, `EventBus`), taken from the types of its
// reference implementations while the root entry does not export them yet. Type-only: nothing of
// `@org/core/testing` is loaded at run time. Once `@org/core` exports them, re-export from there.

/** `SessionLog` of `@org/core`. */
export type SessionLog = ReturnType<typeof createMemorySessionLog>;
/** `SessionInfo` of `@org/core`. */
export type SessionInfo = NonNullable<Awaited<ReturnType<SessionLog['get']>>>;
/** `SessionStatus` of `@org/core`. */
export type SessionStatus = SessionInfo['status'];
/** `EventBus` of `@org/core`. */
export type EventBus = ReturnType<typeof createMemoryEventBus>;
/** `EventSubscription` of `@org/core`. */
export type EventSubscription = Awaited<ReturnType<EventBus['subscribe']>>;
