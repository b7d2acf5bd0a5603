import { AgentError } from '@org/core';

/** One subscriber of a channel: a listener in this object, or a stream read by another isolate. */
type Subscriber =
  | { kind: 'local'; listener: (message: string) => void }
  | { kind: 'remote'; token: string; controller: ReadableStreamDefaultController<Uint8Array> };

const encoder = new TextEncoder();

/** The most subscribers one channel of one object takes; a further subscription is refused. */
export const MAX_SUBSCRIBERS_PER_CHANNEL = 1000;

/** A remote subscriber with this many messages still unread is dropped (its bus reopens the stream later). */
const MAX_UNREAD_MESSAGES = 10_000;

/**
 * The fan-out of a Durable Object: messages published on a channel reach every subscriber of that
 * channel in this object, in the order they were published. Subscribers in other isolates read
 * a byte stream of the messages, one JSON string per line.
 */
export class EventHub {
  readonly #channels = new Map<string, Set<Subscriber>>();

  /** Adds a listener in this isolate; returns the function that removes it. */
  subscribeLocal(channel: string, listener: (message: string) => void): () => void {
    const subscriber: Subscriber = { kind: 'local', listener };
    this.#add(channel, subscriber);
    return () => this.#remove(channel, subscriber);
  }

  /** Opens a stream of the channel's messages for another isolate; `token` names it for {@link unsubscribeRemote}. */
  subscribeRemote(channel: string, token: string): ReadableStream<Uint8Array> {
    let subscriber: Subscriber | undefined;
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        subscriber = { kind: 'remote', token, controller };
      },
      // The reader went away (it closed, or its isolate ended): forget it.
      cancel: () => {
        if (subscriber) this.#remove(channel, subscriber);
      },
    });
    if (subscriber) this.#add(channel, subscriber);
    return stream;
  }

  /** Ends the remote subscription `token` of `channel`; `false` when there is none. */
  unsubscribeRemote(channel: string, token: string): boolean {
    for (const subscriber of this.#channels.get(channel) ?? []) {
      if (subscriber.kind === 'remote' && subscriber.token === token) {
        this.#remove(channel, subscriber);
        try {
          subscriber.controller.close();
        } catch {
          // Already cancelled by its reader.
        }
        return true;
      }
    }
    return false;
  }

  /** Sends `message` to every current subscriber of `channel`; resolves to how many there were. */
  publish(channel: string, message: string): number {
    const subscribers = this.#channels.get(channel);
    if (!subscribers) return 0;
    let line: Uint8Array | undefined;
    for (const subscriber of [...subscribers]) {
      if (subscriber.kind === 'local') {
        queueMicrotask(() => subscriber.listener(message));
        continue;
      }
      line ??= encoder.encode(`${JSON.stringify(message)}\n`);
      try {
        if ((subscriber.controller.desiredSize ?? 0) < -MAX_UNREAD_MESSAGES) throw new Error('the subscriber reads too slowly');
        subscriber.controller.enqueue(line);
      } catch (error) {
        this.#remove(channel, subscriber);
        try {
          subscriber.controller.error(error);
        } catch {
          // Already cancelled by its reader.
        }
      }
    }
    return subscribers.size;
  }

  /** How many subscribers the object holds, over all channels. */
  get size(): number {
    let count = 0;
    for (const subscribers of this.#channels.values()) count += subscribers.size;
    return count;
  }

  #add(channel: string, subscriber: Subscriber): void {
    let subscribers = this.#channels.get(channel);
    if (!subscribers) this.#channels.set(channel, (subscribers = new Set()));
    if (subscribers.size >= MAX_SUBSCRIBERS_PER_CHANNEL) {
      // Said to the reader refused: how many, not which channel.
      throw new AgentError('RATE_LIMITED', `Too many readers at once (${MAX_SUBSCRIBERS_PER_CHANNEL}); try again shortly`, {
        details: { limit: MAX_SUBSCRIBERS_PER_CHANNEL },
      });
    }
    subscribers.add(subscriber);
  }

  #remove(channel: string, subscriber: Subscriber): void {
    const subscribers = this.#channels.get(channel);
    if (!subscribers?.delete(subscriber)) return;
    if (subscribers.size === 0) this.#channels.delete(channel);
  }
}

/** A stream of messages being read: `done` settles when it ends or fails; `cancel` stops it. */
export interface MessageStreamReading {
  done: Promise<void>;
  cancel(): void;
}

/**
 * Reads a stream written by {@link EventHub.subscribeRemote} and calls `onMessage` with each
 * message, in order, until the stream ends, fails or is cancelled.
 */
export function readMessageStream(stream: ReadableStream<Uint8Array>, onMessage: (message: string) => void): MessageStreamReading {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  const done = (async () => {
    let buffered = '';
    for (;;) {
      const { done: ended, value } = await reader.read();
      if (ended) return;
      buffered += decoder.decode(value, { stream: true });
      let newline = buffered.indexOf('\n');
      while (newline >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        newline = buffered.indexOf('\n');
        if (line.length === 0) continue;
        const message: unknown = JSON.parse(line);
        if (typeof message === 'string') onMessage(message);
      }
    }
  })();
  return {
    done,
    cancel() {
      reader.cancel().catch(() => undefined);
    },
  };
}
