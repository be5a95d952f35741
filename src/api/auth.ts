import { createHash, timingSafeEqual } from "node:crypto";
import type { Access } from "./deps.ts";
import { ApiError } from "./problem.ts";

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

function unauthorized(detail: string): ApiError {
  return new ApiError({ status: 401, slug: "unauthorized", title: "Unauthorized", detail });
}

/**
 * Throws unless the request may proceed on the listener it arrived on. `access` is absent
 * when a listener did not say how it authenticates: refused, never waved through.
 */
export function authorize(access: Access | undefined, authorization: string | undefined): void {
  if (!access) throw unauthorized("this listener does not accept requests");
  switch (access.kind) {
    case "LocalSocket":
      // The socket file's 0600 mode already decided who may connect.
      return;
    case "Bearer": {
      // RFC 9110 allows several spaces after the scheme; a token copied from a file with
      // its newline, or pasted with a trailing space, is the same token.
      const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
      if (!match?.[1] || !tokensMatch(match[1], access.token)) {
        throw unauthorized("a valid admin token is required: Authorization: Bearer TOKEN");
      }
      return;
    }
    default: {
      const never: never = access;
      throw new Error(`unhandled access ${JSON.stringify(never)}`);
    }
  }
}
