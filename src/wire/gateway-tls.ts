/**
 * TLS for the worker gateway: the daemon's certificate, and the pin a worker checks it with.
 *
 * The certificate is self-signed (ECDSA P-256), generated in-process on first start: no
 * OpenSSL binary is needed on the login node, and the single executable stays the only thing
 * to install. Node's crypto makes the key and the signature; the X.509 structure around them
 * is the minimal DER below (v3, no extensions), which is all TLS needs when the peer
 * authenticates the certificate by its fingerprint rather than by a chain. An admin who wants
 * a certificate of their own gives its key and certificate files instead.
 *
 * Workers do not trust a CA: they pin the SHA-256 fingerprint of the daemon's certificate,
 * read from a file the preparer writes beside the credential files (a path, never a value in
 * the job's environment). A worker that finds another certificate at the gateway's address
 * talks to an impostor and sends it nothing, not even the credential.
 */
import { generateKeyPairSync, randomBytes, sign, X509Certificate } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { checkPrivateFile, replaceFileSynced } from "../lib/durable-fs.ts";

export interface GatewayTls {
  readonly keyPem: string;
  readonly certPem: string;
  /** SHA-256 of the certificate's DER, as "AB:CD:..." (what the worker pins). */
  readonly fingerprint: string;
}

/** Beside the credential files of an allocation. */
export const FINGERPRINT_FILE = "gateway.fingerprint";
const FINGERPRINT_PATTERN = /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/;
const COMMON_NAME = "openai4s-gateway";
const VALIDITY_DAYS = 3650;

// --- minimal DER ---------------------------------------------------------------------

function der(tag: number, body: Uint8Array): Uint8Array {
  const n = body.length;
  const length =
    n < 0x80
      ? [n]
      : n < 0x100
        ? [0x81, n]
        : n < 0x10000
          ? [0x82, n >> 8, n & 0xff]
          : [0x83, n >> 16, (n >> 8) & 0xff, n & 0xff];
  return Buffer.concat([Uint8Array.of(tag, ...length), body]);
}
const seq = (...parts: Uint8Array[]) => der(0x30, Buffer.concat(parts));
const set = (...parts: Uint8Array[]) => der(0x31, Buffer.concat(parts));

function oid(text: string): Uint8Array {
  const [a, b, ...rest] = text.split(".").map(Number) as [number, number, ...number[]];
  const bytes = [40 * a + b];
  for (const value of rest) {
    const base128 = [value & 0x7f];
    for (let v = value >> 7; v > 0; v >>= 7) base128.unshift((v & 0x7f) | 0x80);
    bytes.push(...base128);
  }
  return der(0x06, Uint8Array.from(bytes));
}

/** UTCTime until 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
function time(date: Date): Uint8Array {
  const iso = date.toISOString().replace(/[-:T]/g, "").slice(0, 14); // YYYYMMDDHHMMSS
  return date.getUTCFullYear() < 2050
    ? der(0x17, Buffer.from(`${iso.slice(2)}Z`))
    : der(0x18, Buffer.from(`${iso}Z`));
}

function name(commonName: string): Uint8Array {
  return seq(set(seq(oid("2.5.4.3"), der(0x0c, Buffer.from(commonName)))));
}

/** A self-signed ECDSA P-256 certificate and its key, both PEM. */
export function generateSelfSignedCertificate(now: Date): { keyPem: string; certPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const ecdsaWithSha256 = seq(oid("1.2.840.10045.4.3.2"));
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x01; // positive and without a leading zero byte
  const tbs = seq(
    der(0xa0, der(0x02, Uint8Array.of(2))), // version v3
    der(0x02, serial),
    ecdsaWithSha256,
    name(COMMON_NAME),
    seq(
      time(new Date(now.getTime() - 60_000)),
      time(new Date(now.getTime() + VALIDITY_DAYS * 86_400_000)),
    ),
    name(COMMON_NAME),
    publicKey.export({ type: "spki", format: "der" }),
  );
  const signature = sign("sha256", tbs, privateKey); // DER-encoded ECDSA signature
  const cert = seq(tbs, ecdsaWithSha256, der(0x03, Buffer.concat([Uint8Array.of(0), signature])));
  const base64 = Buffer.from(cert).toString("base64").replace(/.{64}/g, "$&\n");
  return {
    keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    certPem: `-----BEGIN CERTIFICATE-----\n${base64.replace(/\n?$/, "\n")}-----END CERTIFICATE-----\n`,
  };
}

/** The SHA-256 fingerprint of a PEM certificate, "AB:CD:...". Throws on a non-certificate. */
export function certificateFingerprint(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256;
}

export type GatewayTlsResult =
  | { readonly kind: "Loaded"; readonly tls: GatewayTls; readonly generated: boolean }
  | { readonly kind: "Invalid"; readonly message: string };

/**
 * The daemon's own pair from its private state, generated there on first start. The key must
 * be a private file (0600, ours): a readable key lets anyone on the machine impersonate the
 * gateway to every worker.
 */
export function loadOrCreateGatewayTls(
  paths: { readonly key: string; readonly cert: string },
  now: Date,
): GatewayTlsResult {
  let generated = false;
  if (!existsSync(paths.key) || !existsSync(paths.cert)) {
    const pair = generateSelfSignedCertificate(now);
    replaceFileSynced(paths.key, pair.keyPem, { mode: 0o600 });
    replaceFileSynced(paths.cert, pair.certPem, { mode: 0o644 });
    generated = true;
  }
  return loadGatewayTls(paths, generated);
}

/** An admin's pair, or ours: the key must be private, the certificate must parse. */
export function loadGatewayTls(
  paths: { readonly key: string; readonly cert: string },
  generated = false,
): GatewayTlsResult {
  const check = checkPrivateFile(paths.key);
  if (check.kind !== "Private") {
    return {
      kind: "Invalid",
      message: `the worker gateway's TLS key ${paths.key} is not a private file (${check.kind}; expected mode 600)`,
    };
  }
  try {
    const keyPem = readFileSync(paths.key, "utf8");
    const certPem = readFileSync(paths.cert, "utf8");
    return {
      kind: "Loaded",
      tls: { keyPem, certPem, fingerprint: certificateFingerprint(certPem) },
      generated,
    };
  } catch (error) {
    return {
      kind: "Invalid",
      message: `cannot load the worker gateway's TLS certificate ${paths.cert}: ${String(error)}`,
    };
  }
}

/** Written by the preparer beside the credential files of an allocation. */
export function writeGatewayFingerprint(credentialDir: string, fingerprint: string): string {
  const path = join(credentialDir, FINGERPRINT_FILE);
  replaceFileSynced(path, `${fingerprint}\n`, { mode: 0o600 });
  return path;
}

export type ReadFingerprintResult =
  | { readonly kind: "Pinned"; readonly fingerprint: string }
  /** No file: the daemon runs its gateway without TLS (the explicit opt-out). */
  | { readonly kind: "Plain" }
  | { readonly kind: "Invalid"; readonly message: string };

export function readGatewayFingerprint(credentialDir: string): ReadFingerprintResult {
  const path = join(credentialDir, FINGERPRINT_FILE);
  let text: string;
  try {
    text = readFileSync(path, "utf8").trim();
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return { kind: "Plain" };
    return { kind: "Invalid", message: `cannot read ${path}: ${String(error)}` };
  }
  if (!FINGERPRINT_PATTERN.test(text)) {
    return { kind: "Invalid", message: `${path} does not hold a SHA-256 fingerprint` };
  }
  return { kind: "Pinned", fingerprint: text };
}
