/**
 * The SESSION half of AttemptPreparer: derives the submitted spec from the durable one, per
 * attempt, so that a credential bound to (allocation, epoch) can exist at all without ever
 * being written into spec_json. A recovery is a new allocation with a new epoch, so it gets
 * new credentials and a new workspace marker: nothing of the lost attempt's identity is
 * replayed.
 *
 * Isolation comes FIRST. The backend must declare a verified SessionIsolationProvider before
 * a single directory, marker or credential is written: a credential file minted into a
 * sandbox that does not exist is a credential any sibling task of the same uid can read.
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../../clock.ts";
import { replaceFileSynced } from "../../durable-fs.ts";
import type { AttemptPreparer, PrepareResult } from "../attempt-preparer.ts";
import { mintCredentials, type RandomBytes, type SigningKey } from "../bootstrap.ts";
import { FINGERPRINT_FILE, writeGatewayFingerprint } from "../gateway-tls.ts";
import type { StateLayout } from "../layout.ts";
import type { Allocation, Workload, WorkloadKind } from "../models.ts";
import { type AllocationBackend, sessionIsolationVerdict } from "../ports.ts";

/** The marker's file name inside the session's workspace. */
export const WORKSPACE_MARKER_FILE = ".openai4s-workspace-marker";
/** What the preparer records about an attempt, in its allocation directory. */
export const SESSION_ATTEMPT_FILE = "session-attempt.json";

export interface SessionAttemptRecord {
  /** How many workers (one per node) this attempt was launched with. */
  readonly ranks: number;
}

/** `<allocationDir>/credentials`: the directory whose path (only) is handed to the backend. */
export function credentialDirOf(allocationDir: string): string {
  return join(allocationDir, "credentials");
}

export function workspaceMarkerPath(workspaceDir: string): string {
  return join(workspaceDir, WORKSPACE_MARKER_FILE);
}

const utf8 = new TextEncoder();

/**
 * The marker content for one attempt: a MAC of (allocation, epoch) under the daemon's key.
 * Derived rather than stored, so readiness can recompute it after a restart with nothing
 * persisted; keyed, so nothing that cannot read the workspace can produce it; per attempt,
 * so a worker looking at a previous attempt's workspace state cannot pass.
 */
export function workspaceMarker(key: SigningKey, allocationId: string, epoch: number): string {
  const text = `openai4s/workspace-marker/v1\0${allocationId}\0${epoch}`;
  return key.mac(utf8.encode(text)).toString("hex").slice(0, 32);
}

/** The attempt record, or null when this allocation was never prepared as a session. */
export function readSessionAttempt(allocationDir: string): SessionAttemptRecord | null {
  try {
    const parsed: unknown = JSON.parse(
      readFileSync(join(allocationDir, SESSION_ATTEMPT_FILE), "utf8"),
    );
    if (typeof parsed !== "object" || parsed === null) return null;
    const ranks = (parsed as { ranks?: unknown }).ranks;
    return typeof ranks === "number" && Number.isSafeInteger(ranks) && ranks >= 1
      ? { ranks }
      : null;
  } catch {
    return null;
  }
}

export interface SessionPreparerOptions {
  readonly layout: StateLayout;
  readonly key: SigningKey;
  readonly clock: Clock;
  readonly random: RandomBytes;
  /** HOST:PORT workers dial, written into each credential file. */
  readonly gatewayAddress: string;
  /**
   * The gateway certificate's fingerprint, written beside the credential files for workers
   * to pin; null when the gateway runs without TLS (then no file, and workers dial plain).
   */
  readonly gatewayFingerprint: string | null;
  /** How to start a worker; `--credential-dir DIR` is appended here, `--rank-env NAME` by the backend. */
  readonly workerCommand: readonly string[];
  /** Must outlive the wait in the backend's queue plus the worker's start-up. */
  readonly credentialTtlMs: number;
  readonly backend: AllocationBackend;
}

export function createSessionPreparer(options: SessionPreparerOptions): AttemptPreparer {
  const { layout, backend } = options;
  return {
    async prepare(workload: Workload, allocation: Allocation): Promise<PrepareResult> {
      if (workload.kind !== "SESSION") {
        throw new Error(`session preparer given a ${workload.kind} workload ${workload.id}`);
      }
      const verdict = await sessionIsolationVerdict(backend);
      if (verdict.kind !== "Verified") {
        return {
          kind: "Refused",
          reason: "ISOLATION_UNAVAILABLE",
          message: `sessions need per-allocation isolation: ${verdict.message}`,
        };
      }
      const profile = backend.profiles().find((p) => p.name === workload.profile);
      if (profile === undefined) {
        return {
          kind: "Refused",
          reason: "SUBMIT_REJECTED",
          message: `profile ${JSON.stringify(workload.profile)} is no longer offered`,
        };
      }
      const ranks = profile.resources.nodes;
      const workspaceDir = layout.workspaceDir(workload.id);
      const allocationDir = layout.allocationDir(workload.id, allocation.id);
      const credentialDir = credentialDirOf(allocationDir);
      mkdirSync(workspaceDir, { recursive: true, mode: 0o700 });
      mkdirSync(allocationDir, { recursive: true, mode: 0o700 });
      replaceFileSynced(
        workspaceMarkerPath(workspaceDir),
        workspaceMarker(options.key, allocation.id, allocation.epoch),
      );
      const record: SessionAttemptRecord = { ranks };
      replaceFileSynced(join(allocationDir, SESSION_ATTEMPT_FILE), `${JSON.stringify(record)}\n`);
      mkdirSync(credentialDir, { recursive: true, mode: 0o700 });
      if (options.gatewayFingerprint !== null) {
        writeGatewayFingerprint(credentialDir, options.gatewayFingerprint);
      } else {
        // A previous run's pin must not outlive a switch to plain TCP (the worker would
        // dial TLS at a plain listener and never connect).
        rmSync(join(credentialDir, FINGERPRINT_FILE), { force: true });
      }
      // Last: a credential must never exist for an attempt whose other files are missing.
      mintCredentials({
        key: options.key,
        allocationId: allocation.id,
        epoch: allocation.epoch,
        ranks,
        ttlMs: options.credentialTtlMs,
        clock: options.clock,
        random: options.random,
        gatewayAddress: options.gatewayAddress,
        credentialDir,
      });
      return {
        kind: "Prepared",
        attempt: {
          launch: {
            kind: "WORKER",
            // The backend appends `--rank-env NAME`; the directory is the preparer's to say.
            workerCommand: [...options.workerCommand, "--credential-dir", credentialDir],
            credentialDir,
            ranks,
            env: { ...(workload.spec.env ?? {}) },
          },
          allocationDir,
          workspaceDir,
          timeLimitSeconds: workload.spec.timeLimitSeconds ?? null,
        },
      };
    },
  };
}

/**
 * Dispatches on the workload's kind. BATCH goes to its own preparer, which never mints a
 * credential and never asks for the isolation capability.
 */
export function createPreparerByKind(
  preparers: Readonly<Record<WorkloadKind, AttemptPreparer>>,
): AttemptPreparer {
  return {
    prepare(workload, allocation) {
      return preparers[workload.kind].prepare(workload, allocation);
    },
  };
}

/**
 * The preparer used when sessions are not enabled (no worker gateway): a SESSION is refused
 * with ISOLATION_UNAVAILABLE before anything is written, because without a gateway there is
 * nothing a worker could safely dial back to.
 */
export function sessionsDisabledPreparer(message: string): AttemptPreparer {
  return {
    async prepare() {
      return { kind: "Refused", reason: "ISOLATION_UNAVAILABLE", message };
    },
  };
}
