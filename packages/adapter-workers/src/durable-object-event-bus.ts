import type { EventBus, EventSubscription } from '@org/core';
import { readMessageStream, type MessageStreamReading } from './event-hub.js';
import type { SessionObject } from './session-object.js';

/** The channels of sessions: `session:<id>` lives in the session's own object. */
const SESSION_CHANNEL_PREFIX = 'session:';

/** Waits between attempts to reopen a broken subscription: from the first, doubling, up to the last. */
const REOPEN_DELAY_MS = [100, 5_000] as const;

/**
 * The name of the object a channel lives in: a session's channel in that session's object (next
 * to its log and its readers), any other channel in an object of its own.
 */
export function objectNameOfChannel(channel: string): string {
  return channel.startsWith(SESSION_CHANNEL_PREFIX) ? channel.slice(SESSION_CHANNEL_PREFIX.length) : `channel:${channel}`;
}

/** The session a channel belongs to, if it is a session's channel. */
export function sessionOfChannel(channel: string): string | undefined {
  return channel.startsWith(SESSION_CHANNEL_PREFIX) ? channel.slice(SESSION_CHANNEL_PREFIX.length) : undefined;
}

interface ChannelState {
  listeners: Set<(message: string) => void>;
  /** The object's stream of this channel, while one is open. */
  reading?: MessageStreamReading;
  token?: string;
  opening?: Promise<void>;
  /** Consecutive failed attempts to reopen, for the back-off. */
  failures: number;
}

/**
 * An `EventBus` on Durable Objects: each channel lives in one {@link SessionObject} (a session's
 * channel `session:<id>` in that session's object), which passes every message published on it
 * to every subscriber, in order. A bus instance holds one stream per channel from the object,
 * shared by its subscribers to that channel, and reopens it if it breaks (messages published
 * meanwhile are missed, which the bus contract allows: readers take data from the log).
 *
 * @example
 * ```ts
 * const bus = createDurableObjectEventBus(env.SESSIONS);
 * const subscription = await bus.subscribe('session:s-1', (message) => console.log(message));
 * await bus.publish('session:s-1', 'end'); // logs "end"
 * await subscription.close();
 * ```
 */
export function createDurableObjectEventBus(namespace: DurableObjectNamespace<SessionObject>): EventBus {
  const channels = new Map<string, ChannelState>();
  const objectOf = (channel: string) => namespace.get(namespace.idFromName(objectNameOfChannel(channel)));

  const open = async (channel: string, state: ChannelState): Promise<void> => {
    const token = crypto.randomUUID();
    const stream = await objectOf(channel).busSubscribe(channel, token);
    if (channels.get(channel) !== state) {
      // Every subscriber left while the stream was being opened.
      void stream.cancel().catch(() => undefined);
      void objectOf(channel).busUnsubscribe(channel, token).catch(() => undefined);
      return;
    }
    const reading = readMessageStream(stream, (message) => {
      state.failures = 0;
      for (const listener of [...state.listeners]) listener(message);
    });
    state.reading = reading;
    state.token = token;
    const ended = () => {
      if (channels.get(channel) !== state || state.reading !== reading) return;
      delete state.reading;
      delete state.token;
      state.failures += 1;
      reopenLater(channel, state);
    };
    reading.done.then(ended, ended);
  };

  /** Opens the channel's stream again after a wait that grows with each failure in a row. */
  const reopenLater = (channel: string, state: ChannelState): void => {
    const wait = Math.min(REOPEN_DELAY_MS[1], REOPEN_DELAY_MS[0] * 2 ** Math.max(0, state.failures - 1));
    setTimeout(() => {
      if (channels.get(channel) !== state || state.reading || state.opening) return;
      state.opening = open(channel, state)
        .catch(() => {
          state.failures += 1;
          reopenLater(channel, state);
        })
        .finally(() => delete state.opening);
    }, wait);
  };

  return {
    async subscribe(channel, listener) {
      let state = channels.get(channel);
      if (!state) channels.set(channel, (state = { listeners: new Set(), failures: 0 }));
      const entry = (message: string) => listener(message);
      state.listeners.add(entry);
      const current = state;
      const close = async () => {
        if (!current.listeners.delete(entry) || current.listeners.size > 0 || channels.get(channel) !== current) return;
        channels.delete(channel);
        const { reading, token } = current;
        // The object ends the stream first, so neither side sees it broken.
        if (token !== undefined) await objectOf(channel).busUnsubscribe(channel, token).catch(() => undefined);
        reading?.cancel();
      };
      try {
        if (!current.reading) {
          current.opening ??= open(channel, current).finally(() => delete current.opening);
          await current.opening;
        }
      } catch (error) {
        await close();
        throw error;
      }
      const subscription: EventSubscription = { close };
      return subscription;
    },
    async publish(channel, message) {
      await objectOf(channel).busPublish(channel, message);
    },
  };
}
