/**
 * What the API's browser guard (servers/http/browser-guard.ts) allows beyond loopback:
 * `OPENAI4S_ALLOWED_HOSTS` (names clients reach the daemon by: a TCP listener's public name,
 * a reverse proxy's Host) and `OPENAI4S_ALLOWED_ORIGINS` (pages allowed to change state: a
 * hub in front of the daemon). Comma-separated; each entry checked, a bad one named. A TCP
 * `--listen` on a literal address adds that address: the admin typed it, and an IP literal
 * cannot be rebound by DNS.
 */
import { isIP } from "node:net";
import type { BrowserGuardSettings } from "../../servers/http/browser-guard.ts";
import type { ListenAddress } from "./listen.ts";

export const ALLOWED_HOSTS_ENV = "OPENAI4S_ALLOWED_HOSTS";
export const ALLOWED_ORIGINS_ENV = "OPENAI4S_ALLOWED_ORIGINS";

export type BrowserSettingsResult =
  | { readonly kind: "Parsed"; readonly settings: BrowserGuardSettings }
  | {
      readonly kind: "Invalid";
      readonly errors: readonly { readonly variable: string; readonly message: string }[];
    };

function entries(raw: string | undefined): readonly string[] {
  return (raw ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
}

/** A host as the guard compares it: lower case, IPv6 in brackets; null when not a host. */
export function normalHost(entry: string): string | null {
  const text = entry.toLowerCase().replace(/\.$/, "");
  const inner = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  if (isIP(inner) === 6) return `[${inner}]`;
  if (isIP(inner) === 4) return inner;
  return /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*$/.test(
    text,
  )
    ? text
    : null;
}

function normalOrigin(entry: string): string | null {
  try {
    const url = new URL(entry);
    const bare =
      url.pathname === "/" && url.search === "" && url.hash === "" && !entry.endsWith("/");
    if ((url.protocol !== "http:" && url.protocol !== "https:") || !bare) return null;
    if (url.username !== "" || url.password !== "") return null;
    return url.origin;
  } catch {
    return null;
  }
}

export function parseBrowserSettings(
  env: Readonly<Record<string, string | undefined>>,
): BrowserSettingsResult {
  const errors: { variable: string; message: string }[] = [];
  const allowedHosts: string[] = [];
  for (const entry of entries(env[ALLOWED_HOSTS_ENV])) {
    const host = normalHost(entry);
    if (host === null) {
      errors.push({
        variable: ALLOWED_HOSTS_ENV,
        message: `${ALLOWED_HOSTS_ENV}: "${entry}" is not a host name or IP address (no scheme, no port)`,
      });
    } else allowedHosts.push(host);
  }
  const allowedOrigins: string[] = [];
  for (const entry of entries(env[ALLOWED_ORIGINS_ENV])) {
    const origin = normalOrigin(entry);
    if (origin === null) {
      errors.push({
        variable: ALLOWED_ORIGINS_ENV,
        message: `${ALLOWED_ORIGINS_ENV}: "${entry}" is not an origin (http[s]://HOST[:PORT], no path)`,
      });
    } else allowedOrigins.push(origin);
  }
  return errors.length > 0
    ? { kind: "Invalid", errors }
    : { kind: "Parsed", settings: { allowedHosts, allowedOrigins } };
}

/** The settings with every TCP listener's literal address (not a wildcard) added. */
export function withListenHosts(
  settings: BrowserGuardSettings,
  listen: readonly ListenAddress[],
): BrowserGuardSettings {
  const hosts = new Set(settings.allowedHosts);
  for (const address of listen) {
    if (address.kind !== "tcp" || isIP(address.host) === 0) continue;
    const host = normalHost(address.host);
    if (host !== null && host !== "0.0.0.0" && host !== "[::]") hosts.add(host);
  }
  return { ...settings, allowedHosts: [...hosts] };
}
