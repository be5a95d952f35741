/**
 * Opening a job's (or an array element's) log for its output, as the root supervisor does,
 * in a directory that may be hostile ground.
 */
import { closeSync, constants, fstatSync, openSync } from "node:fs";
import { errorCode } from "../../lib/durable-fs.ts";

/**
 * Append, create 0600, never through a link (`"a"` would follow one), never blocking: under
 * run_as = "owner" the allocation directory is the owner's, so a job (or its owner's shell)
 * may have put a FIFO where a later element's log goes, whose blocking open() would freeze
 * this process and with it every element's time limit, cancel and end.
 */
const LOG_FLAGS =
  constants.O_WRONLY |
  constants.O_CREAT |
  constants.O_APPEND |
  constants.O_NOFOLLOW |
  constants.O_NONBLOCK;

/**
 * A log opened for the job's output, only if it is a regular file with no other name: a
 * symlink (ELOOP), a FIFO (ENXIO without a reader, S_IFIFO with one) or a hard link to a host
 * file (a root supervisor would append the job's output to it) is refused, never written.
 */
export function openJobLog(path: string): number {
  const refused = (what: string) =>
    new Error(`${path} is not a regular file of its own (${what}): refused, nothing written`);
  let fd: number;
  try {
    fd = openSync(path, LOG_FLAGS, 0o600);
  } catch (error) {
    const code = errorCode(error);
    if (code === "ELOOP") throw refused("a symbolic link");
    if (code === "ENXIO") throw refused("a FIFO or socket");
    throw error;
  }
  const stat = fstatSync(fd);
  if (stat.isFile() && stat.nlink === 1) return fd;
  closeSync(fd);
  throw refused(stat.isFile() ? `a hard link, ${stat.nlink} names` : "not a file");
}
