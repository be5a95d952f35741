/**
 * Reading a file the daemon parses, with a size cap. A record someone else could grow (a
 * 1 GB file where a 40-byte JSON object belongs) must cost a bounded read and a refusal,
 * never the daemon's memory: issue 8 measured 0.7-2.5 GB of RSS from one hostile record.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { errorCode } from "./durable-fs.ts";

export type CappedRead =
  | { readonly kind: "Missing" }
  | { readonly kind: "TooLarge"; readonly sizeBytes: number }
  | { readonly kind: "NotAFile" }
  | { readonly kind: "Read"; readonly text: string };

/**
 * The file's text when it is a regular file of at most `maxBytes`. Symbolic links are not
 * followed (O_NOFOLLOW): a record is a file the daemon wrote, never a link to elsewhere.
 * Errors other than ENOENT/ELOOP are thrown (broken infrastructure).
 */
export function readTextCapped(path: string, maxBytes: number): CappedRead {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT") return { kind: "Missing" };
    if (code === "ELOOP") return { kind: "NotAFile" };
    throw error;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { kind: "NotAFile" };
    if (stat.size > maxBytes) return { kind: "TooLarge", sizeBytes: stat.size };
    const length = readUpTo(fd, stat.size, maxBytes + 1);
    if (length.bytes > maxBytes) return { kind: "TooLarge", sizeBytes: length.bytes };
    return { kind: "Read", text: length.buffer.subarray(0, length.bytes).toString("utf8") };
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads at most `limit` bytes whatever the size said (the file may grow meanwhile), into a
 * buffer sized by what the file holds and grown only when it grew. Sized by the cap instead,
 * every 300-byte job record cost a zeroed 4 MiB buffer: half the daemon's CPU in a burst of
 * 100 submissions went to that, on each tick's read of every record (issue 34's profile).
 */
export function readUpTo(
  fd: number,
  sizeBytes: number,
  limit: number,
): { readonly buffer: Buffer; readonly bytes: number } {
  // One byte past the size, so a file that did not grow is read in one call and ends there.
  let buffer = Buffer.allocUnsafe(Math.min(limit, Math.max(sizeBytes + 1, 512)));
  let bytes = 0;
  for (;;) {
    if (bytes === buffer.length) {
      if (buffer.length >= limit) break;
      const grown = Buffer.allocUnsafe(Math.min(limit, buffer.length * 2));
      buffer.copy(grown, 0, 0, bytes);
      buffer = grown;
    }
    const n = readSync(fd, buffer, bytes, buffer.length - bytes, null);
    if (n === 0) break;
    bytes += n;
  }
  return { buffer, bytes };
}
