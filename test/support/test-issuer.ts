/**
 * A site's OIDC issuer for tests: its own keys (made with jose), its discovery document and
 * JWKS served on loopback, and tokens signed as it would sign them. `rotate()` replaces the
 * signing key the way an issuer's key rotation does; `jwksFetches` counts key downloads.
 */
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

export interface TestIssuer {
  readonly url: string;
  readonly audience: string;
  /** The JWKS the issuer publishes now. */
  jwks(): Promise<{ keys: object[] }>;
  readonly jwksFetches: { count: number };
  /** A token for `claims` (exp one hour after `nowMs` unless given), signed with the current key. */
  sign(claims: JWTPayload, nowMs: number, options?: SignOptions): Promise<string>;
  /** A new current key (new kid); the old one stays published unless `dropOld`. */
  rotate(dropOld?: boolean): Promise<void>;
  /** The current key pair (to forge with: HMAC over its public key, a twin with its kid). */
  current(): { readonly kid: string; readonly keys: KeyPair };
  stop(): void;
}

export interface SignOptions {
  readonly kid?: string;
  readonly key?: CryptoKey | Uint8Array;
  readonly alg?: string;
  readonly noExp?: boolean;
}

export async function startTestIssuer(audience = "openai4s-test"): Promise<TestIssuer> {
  let serial = 0;
  const published: { kid: string; keys: KeyPair }[] = [];
  const fresh = async () => {
    serial += 1;
    return { kid: `key-${serial}`, keys: await generateKeyPair("RS256", { extractable: true }) };
  };
  published.push(await fresh());
  const jwksFetches = { count: 0 };
  const jwks = async () => ({
    keys: await Promise.all(
      published.map(async (p) => ({
        ...(await exportJWK(p.keys.publicKey)),
        kid: p.kid,
        alg: "RS256",
        use: "sig",
      })),
    ),
  });
  let url = "";
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      if (path === "/.well-known/openid-configuration") {
        return Response.json({ issuer: url, jwks_uri: `${url}/jwks` });
      }
      if (path === "/jwks") {
        jwksFetches.count += 1;
        return Response.json(await jwks());
      }
      return new Response("not found", { status: 404 });
    },
  });
  url = `http://127.0.0.1:${server.port}`;
  const current = () => {
    const last = published[published.length - 1];
    if (last === undefined) throw new Error("no key");
    return last;
  };
  return {
    url,
    audience,
    jwks,
    jwksFetches,
    current,
    async sign(claims, nowMs, options = {}) {
      const now = Math.floor(nowMs / 1000);
      const jwt = new SignJWT({ iss: url, aud: audience, iat: now, ...claims }).setProtectedHeader({
        alg: options.alg ?? "RS256",
        kid: options.kid ?? current().kid,
      });
      if (claims.exp === undefined && options.noExp !== true) jwt.setExpirationTime(now + 3600);
      return await jwt.sign(options.key ?? current().keys.privateKey);
    },
    async rotate(dropOld = false) {
      const next = await fresh();
      if (dropOld) published.length = 0;
      published.push(next);
    },
    stop() {
      server.stop(true);
    },
  };
}
