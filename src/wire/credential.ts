/**
 * The credential a backend-placed worker uses to prove "I am the worker this daemon wants":
 * an HMAC-SHA256 over (allocationId, epoch, rank, expiresAt, nonce), signed with a per-daemon
 * key. Every field has a reason: without `epoch` a previous incarnation's credential stays
 * valid (INV-7 forbids it); without `nonce` an intercepted credential can be replayed (the
 * gateway burns each nonce durably); without `expiresAt` a credential lost on a shared disk is
 * good forever; without `rank` one leaked file would let its holder pose as every node.
 *
 * It travels as a file (one per rank, 0600, in a 0700 directory under the allocation's
 * directory) and only the directory path is handed to a backend: a job's environment and argv
 * are readable by anyone who can list jobs. The signature is never written into spec_json and
 * never passed to a log; `SigningKey` keeps the key bytes in a closure so that even
 * `JSON.stringify(key)` cannot leak them.
 *
 * Mode 0600 keeps out other Unix identities; it does not isolate sibling allocations that
 * share the uid. That is the backend's SessionIsolationProvider's job, not this file's.
 */
import {
  createHash,
  createHmac,
  randomBytes as cryptoRandomBytes,
  timingSafeEqual,
} from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import * as v from "valibot";
import { chmodDirBeneath } from "../lib/beneath-fs.ts";
import type { Clock } from "../lib/clock.ts";
import {
  checkPrivateFile,
  errorCode,
  fsyncDir,
  publishExclusive,
  type RandomBytes,
  replaceFileSynced,
} from "../lib/durable-fs.ts";

export const SIGNING_KEY_BYTES = 32;
/** 16 random bytes (128 bits): unguessable, and collision-free across every mint ever. */
const NONCE_BYTES = 16;

/** A random-bytes source, injected so tests can be deterministic where they need to be. */
export type { RandomBytes };

/**
 * The daemon's signing key. The raw bytes never leave this object: only a MAC and a
 * fingerprint do, so no code path can accidentally serialise or log the key.
 */
export interface SigningKey {
  /** HMAC-SHA256 of `data` under the key. */
  mac(data: Uint8Array): Buffer;
  /** A one-way fingerprint (hex): lets processes and operators tell keys apart, safely. */
  readonly fingerprint: string;
}

export function signingKeyFromBytes(bytes: Uint8Array): SigningKey {
  if (bytes.length !== SIGNING_KEY_BYTES) {
    throw new Error(`a signing key is ${SIGNING_KEY_BYTES} bytes, got ${bytes.length}`);
  }
  const secret = Buffer.from(bytes); // a private copy: the caller's buffer may be reused
  const fingerprint = createHash("sha256")
    .update("openai4s/signing-key-fingerprint/v1\0")
    .update(secret)
    .digest("hex")
    .slice(0, 16);
  return {
    mac: (data) => createHmac("sha256", secret).update(data).digest(),
    fingerprint,
  };
}

/**
 * Loads the daemon's signing key, creating it on first start. Publication is
 * write-temp-then-`link`: `link` fails with EEXIST when the name is taken, so of several
 * daemons racing at first start exactly one key is published and every loser reads the
 * winner's (a `rename` would let the last writer silently replace a key the first one
 * already signed with). The temporary file is complete and fsynced before it gets the final
 * name, so nobody ever reads a short key.
 *
 * A key file with the wrong mode, size or type is broken infrastructure and throws: signing
 * with a key other users could read, or one that is truncated, is worse than not starting.
 */
export function loadOrCreateSigningKey(
  path: string,
  random: RandomBytes = cryptoRandomBytes,
): SigningKey {
  const existing = readSigningKeyIfPresent(path);
  if (existing) return existing;
  // False when another process published first: theirs is the key, ours is discarded unused.
  publishExclusive(path, random(SIGNING_KEY_BYTES), { mode: 0o600, random });
  const published = readSigningKeyIfPresent(path);
  if (!published) throw new Error(`signing key ${path} vanished right after publication`);
  return published;
}

function readSigningKeyIfPresent(path: string): SigningKey | null {
  const check = checkPrivateFile(path);
  switch (check.kind) {
    case "Missing":
      return null;
    case "NotAFile":
      throw new Error(`signing key ${path} is not a regular file`);
    case "WrongMode":
      throw new Error(`signing key ${path} has mode ${check.mode.toString(8)}, expected 600`);
    case "Private":
      break;
    default: {
      const never: never = check;
      throw new Error(`unhandled check ${JSON.stringify(never)}`);
    }
  }
  const bytes = readFileSync(path);
  if (bytes.length !== SIGNING_KEY_BYTES) {
    throw new Error(
      `signing key ${path} is ${bytes.length} bytes, expected ${SIGNING_KEY_BYTES}: refusing a truncated or foreign key`,
    );
  }
  return signingKeyFromBytes(bytes);
}

// ---------------------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------------------

export interface CredentialClaims {
  readonly allocationId: string;
  readonly epoch: number;
  readonly rank: number;
  /** Epoch milliseconds. */
  readonly expiresAt: number;
  /** Lowercase hex, at least NONCE_BYTES random bytes. */
  readonly nonce: string;
}

export interface Credential extends CredentialClaims {
  /** Lowercase hex HMAC-SHA256 over `canonicalClaims`. A secret: never log it. */
  readonly signature: string;
}

/** Printable ASCII without spaces: it is echoed into logs and file names. */
const ALLOCATION_ID_PATTERN = /^[\x21-\x7e]{1,200}$/;
const NONCE_PATTERN = /^[0-9a-f]{32,128}$/;
const SIGNATURE_PATTERN = /^[0-9a-f]{64}$/;

const nonNegativeInteger = v.pipe(v.number(), v.safeInteger(), v.minValue(0));

/**
 * The credential's only accepted shape. Strict (unknown keys refuse), lowercase hex only, so
 * there is exactly one text for each credential: a second spelling of the same claims would
 * be a second nonce string for the burn table to miss.
 */
export const CredentialSchema = v.pipe(
  v.strictObject({
    allocationId: v.pipe(v.string(), v.regex(ALLOCATION_ID_PATTERN)),
    epoch: nonNegativeInteger,
    rank: nonNegativeInteger,
    expiresAt: nonNegativeInteger,
    nonce: v.pipe(v.string(), v.regex(NONCE_PATTERN)),
    signature: v.pipe(v.string(), v.regex(SIGNATURE_PATTERN)),
  }),
  v.readonly(),
);

/** A valid-shaped credential, or null. Says nothing about whether it is genuine. */
export function parseCredential(value: unknown): Credential | null {
  const result = v.safeParse(CredentialSchema, value);
  return result.success ? result.output : null;
}

const DOMAIN_TAG = "openai4s/worker-credential/v1";
const utf8 = new TextEncoder();

/**
 * The bytes the signature covers: a domain tag, then every field as a 4-byte big-endian
 * length followed by its UTF-8 text (integers in decimal). Length prefixes make the encoding
 * injective, so no choice of field values can shift a boundary and make the claims of one
 * credential read as another's ("a1" + epoch 23 versus "a12" + epoch 3); the domain tag keeps
 * a MAC made for anything else under this key from ever passing as a credential.
 */
export function canonicalClaims(claims: CredentialClaims): Uint8Array {
  const fields = [
    DOMAIN_TAG,
    claims.allocationId,
    String(claims.epoch),
    String(claims.rank),
    String(claims.expiresAt),
    claims.nonce,
  ].map((f) => utf8.encode(f));
  const total = fields.reduce((sum, f) => sum + 4 + f.length, 0);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let offset = 0;
  for (const field of fields) {
    view.setUint32(offset, field.length);
    out.set(field, offset + 4);
    offset += 4 + field.length;
  }
  return out;
}

export function signCredential(key: SigningKey, claims: CredentialClaims): Credential {
  const credential = { ...claims, signature: key.mac(canonicalClaims(claims)).toString("hex") };
  // Minting something the gateway's parser would refuse is a bug, not an outcome.
  if (!parseCredential(credential)) throw new Error("refusing to sign malformed claims");
  return credential;
}

/** Compares two equal-length byte strings; must take the same time whatever they hold. */
export type ConstantTimeCompare = (presented: Uint8Array, expected: Uint8Array) => boolean;

/**
 * The comparison signatures are checked with. Exported so a test pins it to node's
 * `timingSafeEqual` (a mutation to a plain comparison passed every test before).
 */
export const SIGNATURE_COMPARE: ConstantTimeCompare = timingSafeEqual;

/**
 * Constant-time check of the signature. The comparison never short-circuits on the first
 * differing byte: timing must not tell a forger how many leading bytes were right. `compare`
 * is injectable so a test proves the verdict comes from it and not from some other equality.
 */
export function verifyCredentialSignature(
  key: SigningKey,
  credential: Credential,
  compare: ConstantTimeCompare = SIGNATURE_COMPARE,
): boolean {
  const expected = key.mac(canonicalClaims(credential));
  const presented = Buffer.from(credential.signature, "hex");
  // timingSafeEqual throws on unequal lengths; the schema fixes 32 bytes, so this is a guard.
  if (presented.length !== expected.length) return false;
  return compare(presented, expected);
}

export function mintNonce(random: RandomBytes): string {
  return Buffer.from(random(NONCE_BYTES)).toString("hex");
}

/** The credential file of one rank. */
export function credentialPath(credentialDir: string, rank: number): string {
  return join(credentialDir, `rank-${rank}.cred`);
}

/** What a credential file holds: the credential and the gateway address to dial with it. */
export interface CredentialFile {
  /** HOST:PORT (`[v6]:PORT` for IPv6). */
  readonly gateway: string;
  readonly credential: Credential;
}

export interface MintCredentialsInput {
  readonly key: SigningKey;
  readonly allocationId: string;
  readonly epoch: number;
  /** Ranks 0 .. ranks-1 each get a file. */
  readonly ranks: number;
  /**
   * How long the credentials stay valid. They must outlive the allocation's wait in the
   * backend's queue plus the worker's start-up: a worker that first dials after expiry is
   * refused and exits.
   */
  readonly ttlMs: number;
  readonly clock: Clock;
  readonly random: RandomBytes;
  readonly gatewayAddress: string;
  /** `<allocationDir>/credentials`; created 0700. */
  readonly credentialDir: string;
}

/**
 * Writes one credential file per rank and returns their paths (never the credentials). Each
 * file is written to a 0600 temporary and renamed into place, so a worker never reads a
 * half-written file. Re-executable: a prepare that runs again mints fresh nonces and replaces
 * the files, which is why the rename (last writer wins) is right here and not `link`.
 */
export function mintCredentials(input: MintCredentialsInput): readonly string[] {
  if (!Number.isSafeInteger(input.ranks) || input.ranks < 1) {
    throw new Error(`ranks must be a positive integer, got ${input.ranks}`);
  }
  if (!Number.isSafeInteger(input.ttlMs) || input.ttlMs <= 0) {
    throw new Error(`ttlMs must be a positive integer, got ${input.ttlMs}`);
  }
  mkdirSync(input.credentialDir, { recursive: true, mode: 0o700 });
  // chmod through an fd opened O_NOFOLLOW: a link in its place is refused, not followed.
  chmodDirBeneath(dirname(input.credentialDir), input.credentialDir, 0o700);
  const expiresAt = input.clock.now() + input.ttlMs;
  const paths: string[] = [];
  for (let rank = 0; rank < input.ranks; rank++) {
    const credential = signCredential(input.key, {
      allocationId: input.allocationId,
      epoch: input.epoch,
      rank,
      expiresAt,
      nonce: mintNonce(input.random),
    });
    const file: CredentialFile = { gateway: input.gatewayAddress, credential };
    const path = credentialPath(input.credentialDir, rank);
    // One directory fsync below covers every rank's rename.
    replaceFileSynced(path, `${JSON.stringify(file)}\n`, { mode: 0o600, random: input.random });
    paths.push(path);
  }
  fsyncDir(input.credentialDir);
  return paths;
}

const CredentialFileSchema = v.strictObject({
  gateway: v.pipe(v.string(), v.minLength(3), v.maxLength(300)),
  credential: CredentialSchema,
});

export type ReadCredentialFileResult =
  | { readonly kind: "Read"; readonly file: CredentialFile }
  | { readonly kind: "Missing"; readonly message: string }
  | { readonly kind: "Invalid"; readonly message: string };

/** Reads a credential file. Messages never include the file's content. */
export function readCredentialFile(path: string): ReadCredentialFileResult {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT") return { kind: "Missing", message: `no credential file at ${path}` };
    return { kind: "Invalid", message: `cannot read credential file ${path}: ${code ?? error}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { kind: "Invalid", message: `credential file ${path} is not JSON` };
  }
  const result = v.safeParse(CredentialFileSchema, json);
  if (!result.success) {
    return { kind: "Invalid", message: `credential file ${path} does not hold a credential` };
  }
  return { kind: "Read", file: result.output };
}
