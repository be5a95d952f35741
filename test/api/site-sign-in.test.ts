/**
 * Sign-in through the site's OIDC issuer (issue 32), in process against a test issuer whose
 * keys the test makes (jose) and serves on loopback: a person's first valid token creates
 * their principal with the site's default limits, mapped to the unix account the claim
 * names; every hostile token is 401 and creates nothing.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { SignJWT } from "jose";
import { createJwtVerifier } from "../../src/adapters/identity-oidc/jwt-verifier.ts";
import {
  DEFAULT_USER_CLAIM,
  KEY_REFETCH_COOLDOWN_MS,
  type OidcSettings,
} from "../../src/adapters/identity-oidc/oidc-settings.ts";
import type { SiteIdentity } from "../../src/core/ports/site-identity.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { startTestIssuer, type TestIssuer } from "../support/test-issuer.ts";

const TCP: Access = { kind: "Bearer", token: "admin-secret-token" };
const batch = { kind: "BATCH", profile: "default", command: ["echo", "hi"] };

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function issuer(): Promise<TestIssuer> {
  const i = await startTestIssuer();
  cleanups.push(() => i.stop());
  return i;
}

/** A harness whose daemon trusts `iss`; accounts named `svc*` are refused as system accounts. */
function daemon(iss: TestIssuer, settings: Partial<OidcSettings> = {}): Harness {
  const h = harness({
    principalDefaults: { maxSessions: 2, maxBatch: 5, maxCpus: null, maxGpus: null },
    siteIdentity: (clock): SiteIdentity => ({
      oidc: createJwtVerifier(
        {
          issuer: iss.url,
          audience: iss.audience,
          userClaim: DEFAULT_USER_CLAIM,
          jwksFile: null,
          jwksUri: null,
          ...settings,
        },
        clock,
      ),
      munge: null,
      mungeCreatesPrincipals: false,
      daemonUid: 4242,
      accountRefusal: (a) => (a.startsWith("svc") ? `unix user "${a}": a system account` : null),
    }),
  });
  h.clock.set(Date.now());
  cleanups.push(() => h.close());
  return h;
}

function as(h: Harness, token: string, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return h.request(path, { ...init, headers }, TCP);
}

function submit(h: Harness, token: string): Promise<Response> {
  return as(h, token, "/v1/workloads", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(batch),
  });
}

function principals(h: Harness): { name: string; unixUser: string | null; maxBatch: number }[] {
  return h.sqlite
    .query("SELECT name, unix_user AS unixUser, max_batch AS maxBatch FROM principals")
    .all() as { name: string; unixUser: string | null; maxBatch: number }[];
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

describe("sign-in with the site's OIDC issuer", () => {
  test("a first valid token creates the principal with the site's defaults, mapped to the claim's account", async () => {
    const iss = await issuer();
    const h = daemon(iss);
    const token = await iss.sign({ sub: "u-1", preferred_username: "alice" }, h.clock.now());
    const created = await submit(h, token);
    expect(created.status).toBe(201);
    expect(((await created.json()) as { owner: string }).owner).toBe("alice");
    expect(principals(h)).toEqual([{ name: "alice", unixUser: "alice", maxBatch: 5 }]);
    // A second token for the same person is the same principal, not a second one.
    const again = await iss.sign({ sub: "u-1", preferred_username: "alice" }, h.clock.now());
    const listed = (await (await as(h, again, "/v1/workloads")).json()) as { items: unknown[] };
    expect(listed.items).toHaveLength(1);
    expect(principals(h)).toHaveLength(1);
    // The admin's routes stay the admin's.
    expect((await as(h, again, "/v1/principals")).status).toBe(403);
    expect(h.log.lines.some((l) => l.includes("principal created on first sign-in"))).toBe(true);
  });

  test("a token maps to the principal the admin mapped to that account", async () => {
    const iss = await issuer();
    const h = daemon(iss);
    const added = await h.post("/v1/principals", { name: "sci", unixUser: "bob" });
    expect(added.status).toBe(201);
    const token = await iss.sign({ preferred_username: "bob" }, h.clock.now());
    const created = await submit(h, token);
    expect(((await created.json()) as { owner: string }).owner).toBe("sci");
    expect(principals(h).map((p) => p.name)).toEqual(["sci"]);
  });

  test("every hostile token is 401 and creates no principal", async () => {
    const iss = await issuer();
    const h = daemon(iss);
    const now = h.clock.now();
    const s = Math.floor(now / 1000);
    const claims = { preferred_username: "mallory" };
    const { kid, keys } = iss.current();
    const stranger = await startTestIssuer(iss.audience);
    cleanups.push(() => stranger.stop());
    const spki = Buffer.from(JSON.stringify((await iss.jwks()).keys[0]));
    const hostile: Record<string, string> = {
      expired: await iss.sign({ ...claims, iat: s - 7200, exp: s - 3600 }, now),
      "not yet valid": await iss.sign({ ...claims, nbf: s + 3600 }, now),
      "wrong audience": await iss.sign({ ...claims, aud: "another-app" }, now),
      "wrong issuer": await iss.sign({ ...claims, iss: "https://evil.example" }, now),
      "no expiry": await iss.sign(claims, now, { noExp: true }),
      "alg none": `${b64({ alg: "none", typ: "JWT" })}.${b64({ iss: iss.url, aud: iss.audience, exp: s + 3600, ...claims })}.`,
      "HMAC with the public key": await new SignJWT({
        iss: iss.url,
        aud: iss.audience,
        exp: s + 3600,
        ...claims,
      })
        .setProtectedHeader({ alg: "HS256", kid })
        .sign(new Uint8Array(spki)),
      "unknown kid": await iss.sign(claims, now, {
        kid: "never-published",
        key: stranger.current().keys.privateKey,
      }),
      "another key under the issuer's kid": await iss.sign(claims, now, {
        kid,
        key: stranger.current().keys.privateKey,
      }),
      "a claim that is no account": await iss.sign({ preferred_username: "../etc" }, now),
      "not a JWT": "abc.def.ghi",
    };
    expect(keys.privateKey).toBeDefined();
    const reasons: Record<string, string> = {};
    for (const [what, token] of Object.entries(hostile)) {
      const answer = await as(h, token, "/v1/workloads");
      expect({ what, status: answer.status }).toEqual({ what, status: 401 });
      const detail = ((await answer.json()) as { detail: string }).detail;
      expect(detail).not.toContain(token);
      reasons[what] = detail;
    }
    // Each refusal says why, so the user can act on it (a reason folded into another, say
    // an expired token told "not valid", sends them to the wrong fix).
    const why = (reason: string) => `site sign-in refused: ${reason}`;
    expect(reasons).toEqual({
      expired: why("the token has expired"),
      "not yet valid": why("the token's nbf claim is not accepted (check_failed)"),
      "wrong audience": why("the token's aud claim is not accepted (check_failed)"),
      "wrong issuer": why("the token's iss claim is not accepted (check_failed)"),
      "no expiry": why("the token's exp claim is not accepted (missing)"),
      "alg none": why("the token's algorithm is not accepted"),
      "HMAC with the public key": why("the token's algorithm is not accepted"),
      "unknown kid": why("no key of the issuer matches the token"),
      "another key under the issuer's kid": why("the signature is not valid"),
      "a claim that is no account": why(
        "the token's preferred_username claim does not name a unix account",
      ),
      "not a JWT": why("the token is not valid (ERR_JWS_INVALID)"),
    });
    expect(principals(h)).toEqual([]);
    // The same issuer's good token still works: the refusals above were the tokens'.
    const good = await iss.sign(claims, now);
    expect((await as(h, good, "/v1/workloads")).status).toBe(200);
  });

  test("root and refused accounts are 403 naming why; nothing is created", async () => {
    const iss = await issuer();
    const h = daemon(iss);
    for (const account of ["root", "svc-backup"]) {
      const token = await iss.sign({ preferred_username: account }, h.clock.now());
      const answer = await as(h, token, "/v1/workloads");
      expect(answer.status).toBe(403);
      expect(((await answer.json()) as { detail: string }).detail).toContain(account);
    }
    expect(principals(h)).toEqual([]);
  });

  test("a rotated key is picked up; made-up kids do not hammer the issuer", async () => {
    const iss = await issuer();
    const h = daemon(iss);
    const first = await iss.sign({ preferred_username: "alice" }, h.clock.now());
    expect((await as(h, first, "/v1/workloads")).status).toBe(200);
    await iss.rotate(true);
    // Within the cooldown an unknown kid does not refetch; after it, the new key is fetched.
    const early = await iss.sign({ preferred_username: "alice" }, h.clock.now());
    expect((await as(h, early, "/v1/workloads")).status).toBe(401);
    h.clock.advance(KEY_REFETCH_COOLDOWN_MS);
    const rotated = await iss.sign({ preferred_username: "alice" }, h.clock.now());
    expect((await as(h, rotated, "/v1/workloads")).status).toBe(200);
    const fetches = iss.jwksFetches.count;
    expect(fetches).toBe(2);
    for (let i = 0; i < 20; i++) {
      const junk = await iss.sign({ preferred_username: "alice" }, h.clock.now(), {
        kid: `made-up-${i}`,
      });
      expect((await as(h, junk, "/v1/workloads")).status).toBe(401);
    }
    expect(iss.jwksFetches.count).toBe(fetches);
  });

  test("keys from a file, for a site without outbound access", async () => {
    const iss = await issuer();
    const path = join(import.meta.dir, `.jwks-${process.pid}.json`);
    writeFileSync(path, JSON.stringify(await iss.jwks()));
    cleanups.push(() => Bun.file(path).unlink());
    const h = daemon(iss, { jwksFile: path });
    const token = await iss.sign({ preferred_username: "carol" }, h.clock.now());
    expect((await as(h, token, "/v1/workloads")).status).toBe(200);
    expect(iss.jwksFetches.count).toBe(0);
    // The site drops the rotated JWKS into the file; a token with the new kid reads it again.
    await iss.rotate();
    writeFileSync(path, JSON.stringify(await iss.jwks()));
    h.clock.advance(KEY_REFETCH_COOLDOWN_MS);
    const rotated = await iss.sign({ preferred_username: "carol" }, h.clock.now());
    expect((await as(h, rotated, "/v1/workloads")).status).toBe(200);
    const unknown = await iss.sign({ preferred_username: "carol" }, h.clock.now(), { kid: "x" });
    expect((await as(h, unknown, "/v1/workloads")).status).toBe(401);
  });
});
