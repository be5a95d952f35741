/**
 * The API socket: a unix socket whose file mode (0600) is the access control. Two hazards
 * are handled here. A daemon killed with SIGKILL leaves its socket file behind, and the next
 * start would fail with EADDRINUSE; but unlinking unconditionally would steal the path from
 * a daemon that is alive and serving. So the file is unlinked only after a connection
 * attempt proves nobody answers on it.
 */
import { chmodSync, lstatSync, unlinkSync } from "node:fs";
import { createConnection } from "node:net";
import type { Timers } from "../../lib/clock.ts";

function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code;
}

export type SocketPathState =
  | { readonly kind: "Free" }
  /** A leftover socket file nobody answers on; it was removed. */
  | { readonly kind: "StaleRemoved" }
  | { readonly kind: "InUse"; readonly message: string }
  | { readonly kind: "NotASocket"; readonly message: string };

/** Does anything accept a connection on this socket path within the deadline? */
function socketAnswers(path: string, timers: Timers, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    const done = (answer: boolean) => {
      cancelTimer();
      socket.destroy();
      resolve(answer);
    };
    // A listener too busy to accept within the deadline is still a listener: say "in use".
    const cancelTimer = timers.after(timeoutMs, () => done(true));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export async function clearStaleSocket(path: string, timers: Timers): Promise<SocketPathState> {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return { kind: "Free" };
    throw error;
  }
  if (!stat.isSocket()) {
    return { kind: "NotASocket", message: `${path} exists and is not a socket; not touching it` };
  }
  if (await socketAnswers(path, timers)) {
    return { kind: "InUse", message: `another process answers on ${path}` };
  }
  try {
    unlinkSync(path);
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
  return { kind: "StaleRemoved" };
}

/**
 * Runs `listen` (which creates the socket file) under umask 0177 so the file is born 0600
 * rather than briefly world-connectable, then chmods anyway in case the runtime ignored
 * the umask. The umask is process-wide; `listen` is synchronous, so nothing else in this
 * process creates a file in between.
 */
export function withPrivateSocket<T>(path: string, listen: () => T): T {
  const previous = process.umask(0o177);
  let result: T;
  try {
    result = listen();
  } finally {
    process.umask(previous);
  }
  chmodSync(path, 0o600);
  return result;
}

/**
 * The users' socket (`serve --users-socket`): born private as the admin's is, then opened to
 * everyone (0666) only once the daemon serves it, since on it nothing is granted by the file
 * mode: every caller proves who it is (MUNGE, a token) on every request.
 */
export function withUsersSocket<T>(path: string, listen: () => T): T {
  const result = withPrivateSocket(path, listen);
  chmodSync(path, 0o666);
  return result;
}

/** Removes our socket file at shutdown, only if it is still a socket (never someone's file). */
export function removeSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
}
