/**
 * Who may see the /ui pages. Over TCP a browser cannot send a token as a header, so a login
 * form trades one (the admin's, a principal's, or the site's OIDC token) for a cookie; the
 * cookie holds no secret, only an expiry, who signed in and a MAC over both (and over the
 * admin token's hash, so a rotated admin token ends every UI login). A principal sees only
 * its own work (routes.tsx). Every form
 * that changes something carries a CSRF token derived from the cookie. On the unix socket,
 * whose file mode already decided who may connect, no login is asked, but the CSRF token is.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import { ADMIN, type Caller } from "../../../core/principals.ts";
import { tokensMatch } from "../auth.ts";
import type { Access } from "../deps.ts";

export const UI_COOKIE = "openai4s_ui";
/** Twelve hours: a working day, after which the browser asks for the token again. */
export const UI_LOGIN_SECONDS = 12 * 3600;

export interface UiKeys {
  /** Per daemon process: a restart ends every UI login (nothing to store, nothing to leak). */
  readonly macKey: Buffer;
}

export function newUiKeys(): UiKeys {
  return { macKey: randomBytes(32) };
}

function mac(keys: UiKeys, text: string): string {
  return createHmac("sha256", keys.macKey).update(text, "utf8").digest("base64url");
}

function tokenHash(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("base64url");
}

/** Who a login is: `admin`, or `p~NAME~TOKENID` (`-` for a site sign-in, which has no id). */
function whoText(caller: Caller): string {
  return caller.kind === "Admin" ? "admin" : `p~${caller.name}~${caller.tokenId ?? "-"}`;
}

const COOKIE =
  /^(\d{1,15})\.(admin|p~[a-z_][a-z0-9_.-]{0,31}~(?:[0-9a-f]{16}|-))\.([A-Za-z0-9_-]{43})$/;

/** The cookie value a successful login sets: `${expiresAtMs}.${who}.${mac}`. */
export function mintLogin(
  keys: UiKeys,
  token: string,
  nowMs: number,
  caller: Caller = ADMIN,
  notAfterMs: number | null = null,
): string {
  const expiresAtMs = Math.min(
    nowMs + UI_LOGIN_SECONDS * 1000,
    notAfterMs ?? Number.POSITIVE_INFINITY,
  );
  const who = whoText(caller);
  return `${expiresAtMs}.${who}.${mac(keys, `login:${expiresAtMs}:${who}:${tokenHash(token)}`)}`;
}

/** Who the cookie says signed in, when its MAC and expiry hold; else null. */
export function loginValid(
  keys: UiKeys,
  token: string,
  cookie: string,
  nowMs: number,
): Caller | null {
  const match = COOKIE.exec(cookie);
  if (!match?.[1] || !match[2] || !match[3]) return null;
  const expiresAtMs = Number(match[1]);
  if (expiresAtMs <= nowMs) return null;
  const who = match[2];
  if (!tokensMatch(match[3], mac(keys, `login:${expiresAtMs}:${who}:${tokenHash(token)}`))) {
    return null;
  }
  if (who === "admin") return ADMIN;
  const [, name = "", tokenId = "-"] = who.split("~");
  return { kind: "Principal", name, tokenId: tokenId === "-" ? null : tokenId };
}

export type UiCaller =
  | { readonly kind: "Allowed"; readonly csrf: string; readonly caller: Caller }
  | { readonly kind: "NeedsLogin" }
  | { readonly kind: "Refused" };

/** Whether a /ui request may proceed, and the CSRF token its forms must carry. */
export function uiCaller(
  keys: UiKeys,
  access: Access | undefined,
  cookie: string | undefined,
  nowMs: number,
): UiCaller {
  if (!access) return { kind: "Refused" };
  switch (access.kind) {
    case "LocalSocket":
      return { kind: "Allowed", csrf: mac(keys, "csrf:socket"), caller: ADMIN };
    case "Bearer": {
      const caller = cookie === undefined ? null : loginValid(keys, access.token, cookie, nowMs);
      if (caller === null) return { kind: "NeedsLogin" };
      return { kind: "Allowed", csrf: mac(keys, `csrf:${cookie}`), caller };
    }
    default: {
      const never: never = access;
      throw new Error(`unhandled access ${JSON.stringify(never)}`);
    }
  }
}

export function csrfValid(expected: string, presented: unknown): boolean {
  return typeof presented === "string" && tokensMatch(presented, expected);
}

/** A fresh value for each response's Content-Security-Policy nonce. */
export function newNonce(): string {
  return randomBytes(16).toString("base64");
}

/** Scripts and styles only with this response's nonce; nothing from anywhere else. */
export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "img-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join("; ");
}
