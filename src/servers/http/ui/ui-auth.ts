/**
 * Who may see the /ui pages. Over TCP a browser cannot send the admin token as a header, so
 * a login form trades it for a cookie; the cookie holds no secret, only an expiry and a MAC
 * over it (and over the token's hash, so a rotated token ends every UI login). Every form
 * that changes something carries a CSRF token derived from the cookie. On the unix socket,
 * whose file mode already decided who may connect, no login is asked, but the CSRF token is.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
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

/** The cookie value a successful login sets: `${expiresAtMs}.${mac}`. */
export function mintLogin(keys: UiKeys, token: string, nowMs: number): string {
  const expiresAtMs = nowMs + UI_LOGIN_SECONDS * 1000;
  return `${expiresAtMs}.${mac(keys, `login:${expiresAtMs}:${tokenHash(token)}`)}`;
}

export function loginValid(keys: UiKeys, token: string, cookie: string, nowMs: number): boolean {
  const match = /^(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(cookie);
  if (!match?.[1] || !match[2]) return false;
  const expiresAtMs = Number(match[1]);
  if (expiresAtMs <= nowMs) return false;
  return tokensMatch(match[2], mac(keys, `login:${expiresAtMs}:${tokenHash(token)}`));
}

export type UiCaller =
  | { readonly kind: "Allowed"; readonly csrf: string }
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
      return { kind: "Allowed", csrf: mac(keys, "csrf:socket") };
    case "Bearer":
      if (cookie === undefined || !loginValid(keys, access.token, cookie, nowMs)) {
        return { kind: "NeedsLogin" };
      }
      return { kind: "Allowed", csrf: mac(keys, `csrf:${cookie}`) };
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
