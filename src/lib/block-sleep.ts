/**
 * A synchronous pause, for a process with nothing else to do while it waits: the local job
 * supervisor retrying the record of a job that has ended, on a disk with no room yet.
 */
export function blockFor(ms: number): void {
  Bun.sleepSync(ms);
}
