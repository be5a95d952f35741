/**
 * A server-sent-events body with a bounded buffer, for streaming exec.
 *
 * Backpressure policy: DROP WITH A MARKER. The kernel is never paused for a slow client (a
 * paused cell would hold the session's every later exec, and a client that stalls would stall
 * the science). While more than `maxBufferedBytes` are waiting for the client, droppable
 * events (output) are counted and discarded; once the client catches up a `dropped` event
 * says how many outputs and bytes it missed, in place. Final events are never dropped.
 * A comment line every `keepaliveMs` keeps proxies and idle timers from cutting a silent cell.
 */
import { every, type Timers } from "../../../lib/clock.ts";

export interface EventStream {
  readonly body: ReadableStream<Uint8Array>;
  /** Queues one event; droppable ones are dropped while the buffer is over its cap. */
  push(
    event: string,
    data: unknown,
    options?: { readonly droppable?: boolean; readonly id?: number },
  ): void;
  /** Ends the stream after what is queued. */
  close(): void;
  /** Aborted when the client stopped reading (cancelled the body). */
  readonly cancelled: AbortSignal;
}

const encoder = new TextEncoder();

export function createEventStream(options: {
  readonly maxBufferedBytes: number;
  readonly keepaliveMs: number;
  readonly timers: Timers;
}): EventStream {
  const queue: Uint8Array[] = [];
  let buffered = 0;
  let droppedOutputs = 0;
  let droppedBytes = 0;
  let closed = false;
  let wake: (() => void) | null = null;
  const cancelled = new AbortController();
  const stopKeepalive = every(options.timers, options.keepaliveMs, () =>
    enqueue(encoder.encode(": keepalive\n\n")),
  );

  function enqueue(bytes: Uint8Array): void {
    if (closed || cancelled.signal.aborted) return;
    queue.push(bytes);
    buffered += bytes.length;
    wake?.();
  }

  function frame(event: string, data: unknown, id?: number): Uint8Array {
    // JSON never contains a raw newline, so one `data:` line carries it whole.
    const idLine = id === undefined ? "" : `id: ${id}\n`;
    return encoder.encode(`${idLine}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  function flushDropped(): void {
    if (droppedOutputs === 0) return;
    const marker = frame("dropped", {
      outputs: droppedOutputs,
      bytes: droppedBytes,
      message: `[... ${droppedOutputs} outputs (${droppedBytes} bytes) not delivered: the client read too slowly]`,
    });
    droppedOutputs = 0;
    droppedBytes = 0;
    enqueue(marker);
  }

  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        while (queue.length === 0) {
          if (closed) {
            stopKeepalive();
            controller.close();
            return;
          }
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = null;
        }
        const chunk = queue.shift()!;
        buffered -= chunk.length;
        controller.enqueue(chunk);
      },
      cancel() {
        stopKeepalive();
        queue.length = 0;
        buffered = 0;
        cancelled.abort();
      },
    },
    { highWaterMark: 0 },
  );

  return {
    body,
    cancelled: cancelled.signal,
    push(event, data, pushOptions = {}) {
      const bytes = frame(event, data, pushOptions.id);
      if (pushOptions.droppable && buffered + bytes.length > options.maxBufferedBytes) {
        droppedOutputs += 1;
        droppedBytes += bytes.length;
        return;
      }
      flushDropped();
      enqueue(bytes);
    },
    close() {
      flushDropped();
      closed = true;
      stopKeepalive();
      wake?.();
    },
  };
}
