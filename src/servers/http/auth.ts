import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { StoredToken } from "../../adapters/store-sqlite/index.ts";
import { ADMIN, type Caller } from "../../core/principals.ts";
import type { Access } from "./deps.ts";
import { ApiError } from "./problem.ts";

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * Constant-time comparison of a presented token with the expected one. Both are hashed
 * first so the comparison always runs over 32 bytes: timingSafeEqual throws on unequal
 * lengths, and branching on the length would itself leak the token's length.
 */
export function tokensMatch(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented, "utf8").digest();
  const b = createHash("sha256").update(expected, "utf8").digest();
  return timingSafeEqual(a, b) && expected.length > 0;
}

/** As tokensMatch, against the admin token, its hash computed once per listener. */
function adminTokenMatches(presented: string, access: { readonly token: string }): boolean {
  return timingSafeEqual(sha256(presented), expectedHash(access)) && access.token.length > 0;
}

/** The admin token's hash, computed once per listener rather than on every request. */
const expectedHashes = new WeakMap<object, Buffer>();
function expectedHash(access: { readonly token: string }): Buffer {
  let hash = expectedHashes.get(access);
  if (hash === undefined) {
    hash = sha256(access.token);
    expectedHashes.set(access, hash);
  }
  return hash;
}

function unauthorized(detail: string): ApiError {
  return new ApiError({ status: 401, slug: "unauthorized", title: "Unauthorized", detail });
}

/**
 * A principal's token: `o4s_ID_SECRET`. The id finds the row (and names the token in logs
 * and `token revoke`); only the secret's sha256 is stored, compared in constant time.
 */
const PRINCIPAL_TOKEN = /^o4s_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

export interface IssuedToken {
  readonly id: string;
  /** Shown once, to the admin who issued it; never stored. */
  readonly token: string;
  readonly secretSha256: string;
}

export function mintPrincipalToken(): IssuedToken {
  const id = randomBytes(8).toString("hex");
  const secret = randomBytes(32).toString("base64url");
  return { id, token: `o4s_${id}_${secret}`, secretSha256: sha256(secret).toString("hex") };
}

/** What authentication reads from the store: a token's row by its id. */
export type TokenLookup = (id: string) => StoredToken | null;

const NO_HASH = Buffer.alloc(32);
const decodedHashes = new Map<string, Buffer>();
/** The stored hex hash as bytes, decoded once (bounded like the token cache). */
function secretHash(hex: string): Buffer {
  let bytes = decodedHashes.get(hex);
  if (bytes === undefined) {
    if (decodedHashes.size >= 10_000) decodedHashes.clear();
    bytes = Buffer.from(hex, "hex");
    decodedHashes.set(hex, bytes);
  }
  return bytes;
}

function principalFor(match: RegExpExecArray, lookup: TokenLookup, nowMs: number): Caller | null {
  if (!match[1] || !match[2]) return null;
  const stored = lookup(match[1]);
  // Compared even when no row was found (against a hash of nothing), so a wrong id and a
  // wrong secret take the same time.
  const expected = stored === null ? NO_HASH : secretHash(stored.secretSha256);
  const same = timingSafeEqual(sha256(match[2]), expected);
  if (!stored || !same) return null;
  if (stored.revokedAt !== null) return null;
  if (stored.expiresAt !== null && stored.expiresAt <= nowMs) return null;
  return { kind: "Principal", name: stored.principal, tokenId: stored.id };
}

/**
 * Who is calling, on the listener the request arrived on; throws 401 unless someone may.
 * `access` is absent when a listener did not say how it authenticates: refused, never
 * waved through.
 */
export function authorize(
  access: Access | undefined,
  authorization: string | undefined,
  lookup: TokenLookup,
  nowMs: number,
): Caller {
  if (!access) throw unauthorized("this listener does not accept requests");
  switch (access.kind) {
    case "LocalSocket":
      // The socket file's 0600 mode already decided who may connect: only the daemon's
      // user (and root). Bun does not expose the peer's uid (SO_PEERCRED), so the socket
      // cannot tell principals apart and stays the admin's.
      return ADMIN;
    case "Bearer": {
      // RFC 9110 allows several spaces after the scheme; a token copied from a file with
      // its newline, or pasted with a trailing space, is the same token.
      const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
      const presented = match?.[1];
      if (presented) {
        // A principal-shaped token is looked up first: the admin's (43 characters) never has
        // that shape, so each request pays for one hash, as before principals.
        const shaped = PRINCIPAL_TOKEN.exec(presented);
        if (shaped !== null) {
          const principal = principalFor(shaped, lookup, nowMs);
          if (principal) return principal;
        }
        if (adminTokenMatches(presented, access)) return ADMIN;
      }
      throw unauthorized(
        "a valid token is required: Authorization: Bearer TOKEN (the admin token or a principal's unexpired, unrevoked token)",
      );
    }
    default: {
      const never: never = access;
      throw new Error(`unhandled access ${JSON.stringify(never)}`);
    }
  }
}
