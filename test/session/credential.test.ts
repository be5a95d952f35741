import { describe, expect, test } from "bun:test";
import { randomBytes, timingSafeEqual } from "node:crypto";
import {
  chmodSync,
  existsSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import type { GatewayExpectation } from "../../src/core/ports/worker-gateway.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { judgeCredential, NOT_A_FRAME } from "../../src/servers/worker-gateway/credential.ts";
import {
  type CredentialClaims,
  canonicalClaims,
  credentialPath,
  loadOrCreateSigningKey,
  mintCredentials,
  parseCredential,
  readCredentialFile,
  SIGNATURE_COMPARE,
  SIGNING_KEY_BYTES,
  signCredential,
  signingKeyFromBytes,
  verifyCredentialSignature,
} from "../../src/wire/credential.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-credential-");

const key = signingKeyFromBytes(new Uint8Array(32).fill(7));
const otherKey = signingKeyFromBytes(new Uint8Array(32).fill(8));

const claimsArb: fc.Arbitrary<CredentialClaims> = fc.record({
  allocationId: fc.string({
    unit: fc.constantFrom(...'ab1-_:./\\"{}'),
    minLength: 1,
    maxLength: 12,
  }),
  epoch: fc.nat({ max: 1000 }),
  rank: fc.nat({ max: 64 }),
  expiresAt: fc.nat({ max: 2 ** 45 }),
  nonce: fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => Buffer.from(b).toString("hex")),
});

const NOW = 1_700_000_000_000;

function judgeDeps(expectation: GatewayExpectation | null, burned = new Set<string>()) {
  return {
    key,
    now: NOW,
    expectations: { lookup: () => expectation },
    stopped: () => false,
    burn: (c: { nonce: string }) => {
      if (burned.has(c.nonce)) return false;
      burned.add(c.nonce);
      return true;
    },
    burned,
  };
}

describe("canonical encoding", () => {
  test("is injective: different claims never encode alike (no field-boundary confusion)", () => {
    fc.assert(
      fc.property(claimsArb, claimsArb, (a, b) => {
        const same = Buffer.from(canonicalClaims(a)).equals(Buffer.from(canonicalClaims(b)));
        const equal =
          a.allocationId === b.allocationId &&
          a.epoch === b.epoch &&
          a.rank === b.rank &&
          a.expiresAt === b.expiresAt &&
          a.nonce === b.nonce;
        expect(same).toBe(equal);
      }),
      { numRuns: 2000 },
    );
  });

  test("moving digits across a field boundary always changes the encoding", () => {
    // Exactly the pairs a naive concatenation would confuse: "x12"+3 versus "x1"+23 versus
    // "x"+123: the same digits, cut at two different places between allocationId and epoch.
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("x", "-"), minLength: 1, maxLength: 3 }),
        fc.stringMatching(/^[1-9]{2,7}$/),
        fc.nat({ max: 6 }),
        fc.nat({ max: 6 }),
        (prefix, digits, cutA, cutB) => {
          fc.pre(cutA !== cutB && cutA < digits.length && cutB < digits.length);
          const base = { rank: 0, expiresAt: 5, nonce: "a".repeat(32) };
          const at = (cut: number) => ({
            ...base,
            allocationId: prefix + digits.slice(0, cut),
            epoch: Number(digits.slice(cut)),
          });
          const a = at(cutA);
          const b = at(cutB);
          expect(Buffer.from(canonicalClaims(a)).equals(Buffer.from(canonicalClaims(b)))).toBe(
            false,
          );
          expect(signCredential(key, a).signature).not.toBe(signCredential(key, b).signature);
        },
      ),
      { numRuns: 1000 },
    );
  });

  test("shifting digits between allocationId and epoch changes the signed bytes", () => {
    const base = { rank: 0, expiresAt: NOW, nonce: "ab".repeat(16) };
    const a = signCredential(key, { ...base, allocationId: "a1", epoch: 23 });
    const b = signCredential(key, { ...base, allocationId: "a12", epoch: 3 });
    expect(a.signature).not.toBe(b.signature);
    // Transplanting a's signature onto b's claims must not verify.
    expect(verifyCredentialSignature(key, { ...b, signature: a.signature })).toBe(false);
  });
});

describe("signature", () => {
  test("round trip: signed claims survive JSON and verify; another key does not", () => {
    fc.assert(
      fc.property(claimsArb, (claims) => {
        fc.pre(parseCredential({ ...claims, signature: "0".repeat(64) }) !== null);
        const credential = signCredential(key, claims);
        const back = parseCredential(JSON.parse(JSON.stringify(credential)));
        expect(back).toEqual(credential);
        expect(verifyCredentialSignature(key, back!)).toBe(true);
        expect(verifyCredentialSignature(otherKey, back!)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  test("any single-byte mutation of a credential frame is refused, and burns nothing", () => {
    const claims = {
      allocationId: "alloc-7",
      epoch: 3,
      rank: 1,
      expiresAt: NOW + 60_000,
      nonce: "0123456789abcdef".repeat(2),
    };
    const credential = signCredential(key, claims);
    const expectation = { epoch: 3, ranks: 2, fenced: false };
    const bytes = new TextEncoder().encode(JSON.stringify({ kind: "credential", credential }));
    // The unmutated frame is accepted: the mutations below are refused for their mutation.
    const pristine = judgeDeps(expectation);
    expect(
      judgeCredential(JSON.parse(new TextDecoder().decode(bytes)), "malformed", pristine).kind,
    ).toBe("Accepted");
    const decoder = new TextDecoder("utf-8", { fatal: true });
    fc.assert(
      fc.property(
        fc.nat({ max: bytes.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        (index, delta) => {
          const mutated = bytes.slice();
          mutated[index] = (mutated[index]! + delta) & 0xff;
          let frame: unknown = NOT_A_FRAME;
          try {
            frame = JSON.parse(decoder.decode(mutated));
          } catch {
            // not even JSON: judged as garbage
          }
          const deps = judgeDeps(expectation);
          const verdict = judgeCredential(frame, "malformed", deps);
          expect(verdict.kind).toBe("Refused");
          expect(deps.burned.size).toBe(0);
        },
      ),
      { numRuns: 3000 },
    );
  });
});

describe("every signed field is bound by the signature", () => {
  const claims: CredentialClaims = {
    allocationId: "alloc-1",
    epoch: 3,
    rank: 1,
    expiresAt: NOW + 60_000,
    nonce: "ab".repeat(16),
  };
  // Each field changed ALONE, to a value the gateway would otherwise accept.
  const mutations: readonly [keyof CredentialClaims, CredentialClaims][] = [
    ["allocationId", { ...claims, allocationId: "alloc-2" }],
    ["epoch", { ...claims, epoch: 4 }],
    ["rank", { ...claims, rank: 0 }],
    ["expiresAt", { ...claims, expiresAt: claims.expiresAt + 1 }],
    ["nonce", { ...claims, nonce: "cd".repeat(16) }],
  ];

  test.each(mutations)("%s changed alone under the old signature is refused", (_field, mutated) => {
    const { signature } = signCredential(key, claims);
    const tampered = { ...mutated, signature };
    expect(verifyCredentialSignature(key, tampered)).toBe(false);
    // And through the gateway's judge, with expectations that fit the mutated claims.
    const verdict = judgeCredential(
      { kind: "credential", credential: tampered },
      "malformed",
      judgeDeps({ epoch: mutated.epoch, ranks: 8, fenced: false }),
    );
    expect(verdict).toMatchObject({ kind: "Refused", reason: "forged" });
    // The same claims, honestly signed, are accepted: only the signature refused them.
    const honest = judgeCredential(
      { kind: "credential", credential: signCredential(key, mutated) },
      "malformed",
      judgeDeps({ epoch: mutated.epoch, ranks: 8, fenced: false }),
    );
    expect(honest.kind).toBe("Accepted");
  });

  test("the verdict is the constant-time comparator's, and that is node's timingSafeEqual", () => {
    expect(SIGNATURE_COMPARE).toBe(timingSafeEqual);
    const credential = signCredential(key, claims);
    const calls: [Uint8Array, Uint8Array][] = [];
    const spy = (answer: boolean) => (a: Uint8Array, b: Uint8Array) => {
      calls.push([a, b]);
      return answer;
    };
    // A comparator that says "different" refuses even a genuine credential, and one that
    // says "equal" is believed: the verdict is its, not a plain comparison's beside it.
    expect(verifyCredentialSignature(key, credential, spy(false))).toBe(false);
    expect(verifyCredentialSignature(key, credential, spy(true))).toBe(true);
    expect(calls).toHaveLength(2);
    expect(Buffer.from(calls[0]?.[0] ?? []).toString("hex")).toBe(credential.signature);
  });
});

describe("judgeCredential", () => {
  const expectation = { epoch: 2, ranks: 2, fenced: false };
  const good = {
    allocationId: "a",
    epoch: 2,
    rank: 1,
    expiresAt: NOW + 1000,
    nonce: "f".repeat(32),
  };
  const frame = (claims: CredentialClaims, k = key) => ({
    kind: "credential",
    credential: signCredential(k, claims),
  });
  const reason = (f: unknown, exp: GatewayExpectation | null = expectation) => {
    const v = judgeCredential(f, "malformed", judgeDeps(exp));
    return v.kind === "Refused" ? v.reason : v.kind;
  };

  test("names every refusal (for the log) and accepts the good one", () => {
    expect(reason(frame(good))).toBe("Accepted");
    expect(reason(frame(good, otherKey))).toBe("forged");
    expect(reason(frame({ ...good, expiresAt: NOW }))).toBe("expired");
    expect(reason(frame(good), null)).toBe("unknown allocation");
    expect(reason(frame(good), { ...expectation, fenced: true })).toBe("fenced");
    expect(reason(frame({ ...good, epoch: 1 }))).toBe("wrong epoch");
    expect(reason(frame({ ...good, rank: 2 }))).toBe("rank out of range");
    expect(reason(NOT_A_FRAME)).toBe("malformed");
    expect(reason({ kind: "credential" })).toBe("malformed");
    expect(reason({ ...frame(good), extra: 1 })).toBe("malformed");
  });

  test("a second presentation is a replay", () => {
    const deps = judgeDeps(expectation);
    const f = frame(good);
    expect(judgeCredential(f, "malformed", deps).kind).toBe("Accepted");
    const again = judgeCredential(f, "malformed", deps);
    expect(again.kind === "Refused" && again.reason).toBe("replayed");
  });

  test("consults the expectations and computes the HMAC even for garbage", () => {
    let lookups = 0;
    let macs = 0;
    const countingKey = {
      fingerprint: key.fingerprint,
      mac: (d: Uint8Array) => {
        macs++;
        return key.mac(d);
      },
    };
    for (const f of [NOT_A_FRAME, 42, frame(good, otherKey)]) {
      judgeCredential(f, "malformed", {
        ...judgeDeps(expectation),
        key: countingKey,
        expectations: {
          lookup: () => {
            lookups++;
            return expectation;
          },
        },
      });
    }
    expect({ lookups, macs }).toEqual({ lookups: 3, macs: 3 });
  });
});

describe("signing key file", () => {
  test("created 0600 with 32 bytes, and the same key on every later load", () => {
    const path = join(tempDir(), "signing-key");
    const first = loadOrCreateSigningKey(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path).length).toBe(SIGNING_KEY_BYTES);
    expect(loadOrCreateSigningKey(path).fingerprint).toBe(first.fingerprint);
    // No temporary sibling is left behind, whatever it is named.
    expect(readdirSync(join(path, ".."))).toEqual(["signing-key"]);
  });

  test("never serialises the key bytes", () => {
    const path = join(tempDir(), "signing-key");
    const k = loadOrCreateSigningKey(path);
    const hex = readFileSync(path).toString("hex");
    expect(JSON.stringify(k)).not.toContain(hex);
    expect(Bun.inspect(k)).not.toContain(hex);
  });

  test("refuses a key file with a loose mode, a wrong size, or that is a symlink", () => {
    const dir = tempDir();
    const loose = join(dir, "loose");
    writeFileSync(loose, randomBytes(32), { mode: 0o644 });
    chmodSync(loose, 0o644);
    expect(() => loadOrCreateSigningKey(loose)).toThrow(/mode 644/);
    const short = join(dir, "short");
    writeFileSync(short, randomBytes(16), { mode: 0o600 });
    expect(() => loadOrCreateSigningKey(short)).toThrow(/16 bytes/);
    const target = join(dir, "target");
    writeFileSync(target, randomBytes(32), { mode: 0o600 });
    const link = join(dir, "link");
    symlinkSync(target, link);
    expect(() => loadOrCreateSigningKey(link)).toThrow(/not a regular file/);
  });
});

describe("mintCredentials", () => {
  test("one 0600 file per rank in a 0700 directory; returns paths only", () => {
    const clock = manualClock(NOW);
    const credentialDir = join(tempDir(), "alloc", "credentials");
    const paths = mintCredentials({
      key,
      allocationId: "alloc-1",
      epoch: 4,
      ranks: 3,
      ttlMs: 60_000,
      clock,
      random: randomBytes,
      gatewayAddress: "127.0.0.1:7000",
      credentialDir,
    });
    expect(paths).toEqual([0, 1, 2].map((r) => credentialPath(credentialDir, r)));
    expect(statSync(credentialDir).mode & 0o777).toBe(0o700);
    const nonces = new Set<string>();
    for (const [rank, path] of paths.entries()) {
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const read = readCredentialFile(path);
      if (read.kind !== "Read") throw new Error(read.message);
      const { credential, gateway } = read.file;
      expect(gateway).toBe("127.0.0.1:7000");
      expect(credential).toMatchObject({ allocationId: "alloc-1", epoch: 4, rank });
      expect(credential.expiresAt).toBe(NOW + 60_000);
      expect(verifyCredentialSignature(key, credential)).toBe(true);
      nonces.add(credential.nonce);
    }
    expect(nonces.size).toBe(3);
    expect(readdirSync(credentialDir).sort()).toEqual([
      "rank-0.cred",
      "rank-1.cred",
      "rank-2.cred",
    ]);
  });

  test("minting again (a re-run prepare) replaces the files with fresh nonces", () => {
    const credentialDir = join(tempDir(), "credentials");
    const input = {
      key,
      allocationId: "a",
      epoch: 1,
      ranks: 1,
      ttlMs: 1000,
      clock: manualClock(NOW),
      random: randomBytes,
      gatewayAddress: "h:1",
      credentialDir,
    };
    const [path] = mintCredentials(input);
    const before = readFileSync(path!, "utf8");
    mintCredentials(input);
    expect(readFileSync(path!, "utf8")).not.toBe(before);
    expect(readdirSync(credentialDir)).toEqual(["rank-0.cred"]);
  });

  test("a rank count or lifetime that is not a positive integer is a bug: throws, writes nothing", () => {
    // Guards the input checks: zero ranks would mint no file (every worker exits "no usable
    // credential"), a fractional count one file too many, a non-positive TTL a credential
    // already expired.
    const credentialDir = join(tempDir(), "credentials");
    const input = {
      key,
      allocationId: "a",
      epoch: 1,
      ranks: 1,
      ttlMs: 1000,
      clock: manualClock(NOW),
      random: randomBytes,
      gatewayAddress: "h:1",
      credentialDir,
    };
    for (const ranks of [0, -1, 1.5, Number.NaN]) {
      expect(() => mintCredentials({ ...input, ranks })).toThrow(
        "ranks must be a positive integer",
      );
    }
    for (const ttlMs of [0, -5, 0.5]) {
      expect(() => mintCredentials({ ...input, ttlMs })).toThrow(
        "ttlMs must be a positive integer",
      );
    }
    expect(existsSync(credentialDir)).toBe(false);
  });

  test("the signed bytes are exactly the length-prefixed fields, nothing after them", () => {
    // Guards the layout: padding or a miscounted prefix would change what a signature
    // covers (and break every worker of another build).
    const bytes = canonicalClaims({
      allocationId: "a-1",
      epoch: 12,
      rank: 3,
      expiresAt: 45,
      nonce: "n0",
    });
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const fields: string[] = [];
    let offset = 0;
    while (offset < bytes.length) {
      const length = view.getUint32(offset);
      fields.push(new TextDecoder().decode(bytes.subarray(offset + 4, offset + 4 + length)));
      offset += 4 + length;
    }
    expect(offset).toBe(bytes.length);
    expect(fields.slice(1)).toEqual(["a-1", "12", "3", "45", "n0"]);
    expect(fields[0]?.length).toBeGreaterThan(0);
  });

  test("a credential file's gateway address is at most 300 characters", () => {
    const dir = tempDir();
    const credential = signCredential(key, {
      allocationId: "a",
      epoch: 1,
      rank: 0,
      expiresAt: NOW,
      nonce: "0".repeat(32),
    });
    const write = (gateway: string) => {
      const path = join(dir, `g${gateway.length}.cred`);
      writeFileSync(path, JSON.stringify({ gateway, credential }), { mode: 0o600 });
      return readCredentialFile(path).kind;
    };
    expect(write(`${"h".repeat(295)}:7000`)).toBe("Read");
    expect(write(`${"h".repeat(296)}:7000`)).toBe("Invalid");
  });

  test("readCredentialFile: missing and invalid files, without echoing content", () => {
    const dir = tempDir();
    expect(readCredentialFile(join(dir, "nope")).kind).toBe("Missing");
    const bad = join(dir, "bad.cred");
    writeFileSync(bad, '{"gateway":"h:1","credential":{"secret-ish":"abc123"}}');
    const read = readCredentialFile(bad);
    expect(read.kind).toBe("Invalid");
    expect(JSON.stringify(read)).not.toContain("abc123");
  });
});
