/**
 * The verdict on a credential frame: pure apart from `burn`, so it can be tested without
 * sockets; the gateway calls exactly this.
 */

import type { GatewayExpectations } from "../../core/ports/worker-gateway.ts";
import {
  type Credential,
  type SigningKey,
  verifyCredentialSignature,
} from "../../wire/credential.ts";
import { parseCredentialFrame } from "../../wire/worker-protocol.ts";

/** Why a credential was refused: for the daemon's log, never for the peer. */
export type RefusalReason =
  | "malformed"
  | "oversized"
  | "handshake timeout"
  | "forged"
  | "expired"
  | "unknown allocation"
  | "fenced"
  | "wrong epoch"
  | "rank out of range"
  | "replayed"
  | "internal error";

export type Unparsable = "malformed" | "oversized";

export type CredentialVerdict =
  | { readonly kind: "Accepted"; readonly credential: Credential }
  | {
      readonly kind: "Refused";
      readonly reason: RefusalReason;
      /** The claims, when the signature held (so they may be logged); otherwise null. */
      readonly authentic: Credential | null;
    };

export interface JudgeDeps {
  readonly key: SigningKey;
  /** Injected-clock epoch milliseconds. */
  readonly now: number;
  readonly expectations: GatewayExpectations;
  /** (allocation, epoch) pairs this gateway was told to stop. */
  readonly stopped: (allocationId: string, epoch: number) => boolean;
  /** Burns the nonce durably; false when it was burned already (a replay). */
  readonly burn: (credential: Credential) => boolean;
}

/** Passed as the frame when the bytes did not even make one frame. */
export const NOT_A_FRAME: unique symbol = Symbol("not a frame");

/** Stands in for an unparseable credential, so garbage costs the same HMAC as a forgery. */
const DUMMY_CREDENTIAL: Credential = {
  allocationId: "-",
  epoch: 0,
  rank: 0,
  expiresAt: 0,
  nonce: "0".repeat(32),
  signature: "0".repeat(64),
};

/**
 * Judges the first frame. Every path, garbage included, computes the HMAC and consults the
 * expectations before deciding; only a credential that passed every other check reaches the
 * burn, so a stranger's bytes never cause a write.
 */
export function judgeCredential(
  frame: unknown,
  unparsable: Unparsable,
  deps: JudgeDeps,
): CredentialVerdict {
  const credential = frame === NOT_A_FRAME ? null : parseCredentialFrame(frame);
  const subject = credential ?? DUMMY_CREDENTIAL;
  const genuine = verifyCredentialSignature(deps.key, subject);
  const expectation = deps.expectations.lookup(subject.allocationId);
  const refused = (reason: RefusalReason): CredentialVerdict => ({
    kind: "Refused",
    reason,
    authentic: genuine ? credential : null,
  });
  if (!credential) return refused(unparsable);
  if (!genuine) return refused("forged");
  if (credential.expiresAt <= deps.now) return refused("expired");
  if (!expectation) return refused("unknown allocation");
  if (expectation.fenced || deps.stopped(credential.allocationId, credential.epoch)) {
    return refused("fenced");
  }
  if (expectation.epoch !== credential.epoch) return refused("wrong epoch");
  if (credential.rank >= expectation.ranks) return refused("rank out of range");
  if (!deps.burn(credential)) return refused("replayed");
  return { kind: "Accepted", credential };
}
