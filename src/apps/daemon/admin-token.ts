/**
 * The admin token a TCP listener demands as `Authorization: Bearer TOKEN`. Created on first
 * start, mode 0600, published with link(2) so two daemons starting at once agree on one
 * token instead of each overwriting the other's (a rename would let the loser's token
 * silently replace one a client already read).
 */
import { randomBytes as cryptoRandomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { checkPrivateFile, publishExclusive } from "../../lib/durable-fs.ts";

/** base64url of 32 random bytes. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export class AdminTokenError extends Error {
  override readonly name = "AdminTokenError";
}

function readIfPresent(path: string): string | null {
  const check = checkPrivateFile(path);
  switch (check.kind) {
    case "Missing":
      return null;
    case "NotAFile":
      throw new AdminTokenError(`admin token ${path} is not a regular file`);
    case "WrongMode":
      // A token others could read has been readable by them: refuse rather than quietly fix.
      throw new AdminTokenError(
        `admin token ${path} has mode ${check.mode.toString(8)}, expected 600: delete it to mint a new one`,
      );
    case "Private":
      break;
    default: {
      const never: never = check;
      throw new Error(`unhandled check ${JSON.stringify(never)}`);
    }
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
  // Another daemon may publish first (publishExclusive returns false): its token is the token.
  publishExclusive(path, `${Buffer.from(random(32)).toString("base64url")}\n`, {
    mode: 0o600,
    random,
  });
  const published = readIfPresent(path);
  if (published === null) throw new AdminTokenError(`admin token ${path} vanished after creation`);
  return published;
}
