/**
 * Writes frames to a socket in order, without ever blocking and without unbounded memory:
 * what the socket does not take now is kept and written on `drain`, up to a cap past which
 * the peer is presumed gone (the gateway and the worker both write through it).
 */
/** The part of a Bun socket the writer needs (a structural type, so tests can fake it). */
export interface WritableSocket {
  write(data: Uint8Array): number;
  end(): void;
  terminate(): void;
}

export interface SocketWriter {
  /**
   * Queues `bytes` and writes what the kernel accepts now. Returns false (and terminates the
   * connection) when the peer has stopped reading and the backlog passed its cap.
   */
  write(bytes: Uint8Array): boolean;
  /** Call from the socket's `drain` handler. */
  flush(): void;
  /** Half-closes (FIN) once everything queued has been written. */
  endWhenFlushed(): void;
  /** Bytes queued but not yet accepted by the kernel. */
  pending(): number;
}

/**
 * `socket.write` on a Bun socket is unbuffered: it writes what the kernel takes and returns
 * the count, so the rest must be kept and written on `drain` or it is silently lost (a
 * truncated frame desynchronises the stream for good). This keeps that remainder.
 */
export function createSocketWriter(
  socket: WritableSocket,
  options: { readonly maxPendingBytes: number },
): SocketWriter {
  const queue: Uint8Array[] = [];
  let queued = 0;
  let ending = false;
  let dead = false;

  function flush(): void {
    while (!dead && queue.length > 0) {
      const head = queue[0]!;
      const written = socket.write(head);
      if (written < 0) {
        // The socket is closed: nothing queued can be delivered any more.
        dead = true;
        queue.length = 0;
        queued = 0;
        return;
      }
      queued -= written;
      if (written < head.length) {
        queue[0] = head.subarray(written);
        return; // the kernel buffer is full: `drain` calls us again
      }
      queue.shift();
    }
    if (!dead && ending && queue.length === 0) {
      dead = true;
      socket.end();
    }
  }

  return {
    write(bytes) {
      if (dead || ending) return false;
      queue.push(bytes);
      queued += bytes.length;
      if (queued > options.maxPendingBytes) {
        dead = true;
        queue.length = 0;
        queued = 0;
        socket.terminate();
        return false;
      }
      if (queue.length === 1) flush();
      return true;
    },
    flush,
    endWhenFlushed() {
      if (dead || ending) return;
      ending = true;
      flush();
    },
    pending: () => queued,
  };
}
