/**
 * The issuer's signing keys for jose: fetched from the discovery document's `jwks_uri` (or a
 * given URL), or read from a file. Held in memory; a token naming a `kid` the held set lacks
 * loads the keys again, at most once per cooldown (the daemon's clock), which is how an
 * issuer's key rotation is picked up without a restart and without letting made-up kids
 * hammer the issuer. The set is also reloaded when older than its maximum age, so a key the
 * issuer withdrew stops verifying.
 */
import { readFile } from "node:fs/promises";
import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import {
  KEY_CACHE_MAX_AGE_MS,
  KEY_REFETCH_COOLDOWN_MS,
  type OidcSettings,
} from "./oidc-settings.ts";

const FETCH_TIMEOUT_MS = 5_000;
/** A JWKS larger than this is no issuer's: not read whole into memory. */
const MAX_JWKS_BYTES = 1024 * 1024;

async function fetchJson(url: string): Promise<unknown> {
  const response = await fetch(url, {
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    redirect: "error",
  });
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  const text = await response.text();
  if (text.length > MAX_JWKS_BYTES) throw new Error(`${url} answered more than 1 MiB`);
  return JSON.parse(text);
}

/** The discovery document's `jwks_uri`, checked to belong to the configured issuer. */
async function discoverJwksUri(issuer: string): Promise<string> {
  const url = `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  const doc = (await fetchJson(url)) as { issuer?: unknown; jwks_uri?: unknown };
  // OIDC Discovery 4.3: the document's issuer must be the one asked for, else a document
  // planted elsewhere could name another issuer's keys.
  if (doc.issuer !== issuer) {
    throw new Error(`${url} names issuer ${JSON.stringify(doc.issuer)}, not ${issuer}`);
  }
  if (typeof doc.jwks_uri !== "string") throw new Error(`${url} has no jwks_uri`);
  return doc.jwks_uri;
}

function asKeySet(value: unknown, where: string): JSONWebKeySet {
  const keys = (value as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error(`${where} is not a JWKS (no "keys" array)`);
  return value as JSONWebKeySet;
}

/** Where the keys come from, loaded fresh on each call. */
function keyLoader(settings: OidcSettings): () => Promise<JSONWebKeySet> {
  const file = settings.jwksFile;
  if (file !== null) {
    return async () => asKeySet(JSON.parse(await readFile(file, "utf8")), file);
  }
  let uri = settings.jwksUri;
  return async () => {
    uri ??= await discoverJwksUri(settings.issuer);
    return asKeySet(await fetchJson(uri), uri);
  };
}

export function issuerKeys(
  settings: OidcSettings,
  nowMs: () => number,
  load: () => Promise<JSONWebKeySet> = keyLoader(settings),
): JWTVerifyGetKey {
  let held: JWTVerifyGetKey | null = null;
  let loadedAt = Number.NEGATIVE_INFINITY;
  let attemptedAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;
  const reload = (): Promise<void> => {
    // One load at a time: a burst of tokens with an unknown kid waits for the same one.
    inFlight ??= (async () => {
      attemptedAt = nowMs();
      try {
        held = createLocalJWKSet(await load());
        loadedAt = nowMs();
      } finally {
        inFlight = null;
      }
    })();
    return inFlight;
  };
  const mayReload = () => nowMs() - attemptedAt >= KEY_REFETCH_COOLDOWN_MS;
  return async (header, token) => {
    if ((held === null || nowMs() - loadedAt >= KEY_CACHE_MAX_AGE_MS) && mayReload()) {
      await reload();
    }
    if (held === null) throw new Error("the issuer's keys are unavailable");
    try {
      return await held(header, token);
    } catch (error) {
      if (!mayReload()) throw error;
      await reload();
      return await held(header, token);
    }
  };
}
