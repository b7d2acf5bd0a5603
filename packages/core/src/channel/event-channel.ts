/**
 * A single-consumer async queue. The loop and the function handlers push events from any task;
 * the run's generator pulls them in order. Pushing after `close` is ignored, so a handler that
 * outlives a cancelled run cannot corrupt a finished stream.
 */
export class EventChannel<T> {
  #buffer: T[] = [];
  #head = 0;
  #closed = false;
  #failure: { error: unknown } | undefined;
  #waiter: (() => void) | undefined;

  /** Queues `item` for the consumer. */
  push(item: T): void {
    if (this.#closed) return;
    this.#buffer.push(item);
    this.#wake();
  }

  /** Ends the stream after what is already queued; `error` is thrown to the consumer after it. */
  close(error?: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    if (error !== undefined) this.#failure = { error };
    this.#wake();
  }

  get closed(): boolean {
    return this.#closed;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      if (this.#head < this.#buffer.length) {
        const item = this.#buffer[this.#head] as T;
        this.#head += 1;
        if (this.#head > 1024 && this.#head * 2 > this.#buffer.length) {
          this.#buffer = this.#buffer.slice(this.#head);
          this.#head = 0;
        }
        yield item;
        continue;
      }
      if (this.#closed) {
        if (this.#failure) throw this.#failure.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
  }

  #wake(): void {
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter();
    }
  }
}
