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
    // Read at most cap + 1 bytes whatever the size said: the file may grow meanwhile.
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    if (length > maxBytes) return { kind: "TooLarge", sizeBytes: length };
    return { kind: "Read", text: buffer.subarray(0, length).toString("utf8") };
  } finally {
    closeSync(fd);
  }
}
