/**
 * Reading a job's output file for `GET /v1/workloads/{id}/logs`: bounded chunks from an
 * offset (never the whole file in memory), the start offset of the last N lines found by
 * reading backwards, and following a file that is still being written until the attempt
 * ends.
 *
 * The file sits in a directory the job can write to, so its name is hostile ground: the job
 * can replace `stdout.log` with a symlink to a file only the daemon may read, or with a FIFO
 * that would block the daemon's open() forever. The open refuses a symlink (O_NOFOLLOW),
 * does not block (O_NONBLOCK), and anything but a regular file with one name (no hard link)
 * is refused after fstat.
 */
import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { errorCode } from "../../../lib/durable-fs.ts";

const LOG_CHUNK_BYTES = 64 * 1024;

export type OpenedLog =
  | { readonly kind: "Opened"; readonly handle: FileHandle; readonly sizeBytes: number }
  | { readonly kind: "Missing" }
  /** A symlink, FIFO, directory, device or hard link where the log should be: never read. */
  | { readonly kind: "NotAFile" };

export async function openLog(path: string): Promise<OpenedLog> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT") return { kind: "Missing" };
    // ELOOP: the last component is a symlink. ENXIO: a socket. Neither is a log.
    if (code === "ELOOP" || code === "ENXIO") return { kind: "NotAFile" };
    throw error;
  }
  const stat = await handle.stat();
  // A second name is a hard link the job made (an owner's allocation directory is the
  // owner's): where fs.protected_hardlinks is off, to a file only this daemon may read.
  if (!stat.isFile() || stat.nlink !== 1) {
    await handle.close();
    return { kind: "NotAFile" };
  }
  return { kind: "Opened", handle, sizeBytes: stat.size };
}

/**
 * The offset where the last `lines` lines of the first `sizeBytes` bytes begin. A final
 * newline ends the last line rather than starting an empty one, as with `tail -n`.
 */
export async function tailOffset(
  handle: FileHandle,
  sizeBytes: number,
  lines: number,
): Promise<number> {
  if (lines <= 0) return sizeBytes;
  const buffer = Buffer.alloc(LOG_CHUNK_BYTES);
  let end = sizeBytes;
  let seen = 0;
  let skipFinalNewline = true;
  while (end > 0) {
    const start = Math.max(0, end - LOG_CHUNK_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, end - start, start);
    for (let i = bytesRead - 1; i >= 0; i--) {
      if (buffer[i] !== 0x0a) {
        skipFinalNewline = false;
        continue;
      }
      if (skipFinalNewline) {
        skipFinalNewline = false;
        continue;
      }
      seen += 1;
      if (seen === lines) return start + i + 1;
    }
    end = start;
  }
  return 0;
}

export interface FollowTarget {
  /** The log's path once it is known (null while no attempt exists yet). */
  path(): string | null;
  /** The attempt (or, before one exists, the workload) has ended: drain and stop. */
  ended(): boolean;
}

export interface LogStreamOptions {
  /** Where to start in the file as first opened (a `tailOffset`, or 0). */
  readonly startOffset: (handle: FileHandle, sizeBytes: number) => Promise<number>;
  /** Keep reading as the file grows until `target.ended()`; else stop at the current end. */
  readonly follow: boolean;
  readonly pollMs: number;
  readonly sleep: (ms: number) => Promise<void>;
}

/**
 * A byte stream of the log. Without follow it is the file from the start offset to its end
 * at the time of reading. With follow it waits for the file to appear, reads what is
 * written, and ends once the attempt has ended and everything written before that was
 * read. Cancelling the stream (the client went away) closes the file.
 */
export function logStream(
  target: FollowTarget,
  first: OpenedLog & { readonly kind: "Opened" | "Missing" },
  options: LogStreamOptions,
): ReadableStream<Uint8Array> {
  let handle: FileHandle | null = null;
  let offset = 0;
  let draining = false;
  let cancelled = false;
  const buffer = Buffer.alloc(LOG_CHUNK_BYTES);

  async function attach(opened: OpenedLog): Promise<boolean> {
    if (opened.kind !== "Opened") return false;
    handle = opened.handle;
    offset = await options.startOffset(opened.handle, opened.sizeBytes);
    return true;
  }

  async function close(): Promise<void> {
    const h = handle;
    handle = null;
    await h?.close();
  }

  let started = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true;
        await attach(first);
      }
      for (;;) {
        if (cancelled) return;
        if (handle === null) {
          const path = target.path();
          if (path !== null && (await attach(await openLog(path)))) continue;
          if (!options.follow || draining) break;
        } else {
          const { bytesRead } = await handle.read(buffer, 0, LOG_CHUNK_BYTES, offset);
          if (bytesRead > 0) {
            offset += bytesRead;
            controller.enqueue(new Uint8Array(buffer.subarray(0, bytesRead)));
            return;
          }
          if (!options.follow || draining) break;
        }
        // At the end of what is there. Once the attempt has ended, read once more: output
        // written between the last read and the end must not be lost.
        if (target.ended()) {
          draining = true;
          continue;
        }
        await options.sleep(options.pollMs);
      }
      await close();
      controller.close();
    },
    async cancel() {
      cancelled = true;
      // Cancelled before the first read (the client left as the answer started): the file
      // opened for it was never attached, and would stay open until garbage collection.
      if (!started && first.kind === "Opened") await first.handle.close();
      await close();
    },
  });
}
