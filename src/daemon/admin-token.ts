/**
 * The admin token a TCP listener demands as `Authorization: Bearer TOKEN`. Created on first
 * start, mode 0600, published with link(2) so two daemons starting at once agree on one
 * token instead of each overwriting the other's (a rename would let the loser's token
 * silently replace one a client already read).
 */
import { randomBytes as cryptoRandomBytes } from "node:crypto";
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  linkSync,
  lstatSync,
  openSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from "node:fs";

/** base64url of 32 random bytes. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code;
}

export class AdminTokenError extends Error {
  override readonly name = "AdminTokenError";
}

function readIfPresent(path: string): string | null {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
  if (!stat.isFile()) throw new AdminTokenError(`admin token ${path} is not a regular file`);
  const mode = stat.mode & 0o777;
  // A token others could read has been readable by them: refuse rather than quietly fix.
  if (mode !== 0o600) {
    throw new AdminTokenError(
      `admin token ${path} has mode ${mode.toString(8)}, expected 600: delete it to mint a new one`,
    );
  }
  const token = readFileSync(path, "utf8").trim();
  if (!TOKEN_PATTERN.test(token)) {
    throw new AdminTokenError(
      `admin token ${path} is not a token this daemon wrote: delete it to mint a new one`,
    );
  }
  return token;
}

export function loadOrCreateAdminToken(
  path: string,
  random: (n: number) => Uint8Array = cryptoRandomBytes,
): string {
  const existing = readIfPresent(path);
  if (existing !== null) return existing;
  const tmp = `${path}.${process.pid}.${Buffer.from(random(8)).toString("hex")}.tmp`;
  try {
    const fd = openSync(tmp, "wx", 0o600);
    try {
      fchmodSync(fd, 0o600);
      const text = Buffer.from(`${Buffer.from(random(32)).toString("base64url")}\n`);
      let written = 0;
      while (written < text.length) written += writeSync(fd, text, written);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (error) {
      // Another daemon published first: its token is the token.
      if (errorCode(error) !== "EEXIST") throw error;
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // Never created or already gone.
    }
  }
  const published = readIfPresent(path);
  if (published === null) throw new AdminTokenError(`admin token ${path} vanished after creation`);
  return published;
}
