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
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import type { AttemptPreparer, PrepareResult } from "../../core/attempt-preparer.ts";
import {
  chooseEnvironment,
  type EnvironmentChoice,
  environmentWorkerArgs,
} from "../../core/environments.ts";
import type { StateLayout } from "../../core/layout.ts";
import type { Allocation, ResourceProfile, Workload } from "../../core/models.ts";
import {
  type AllocationBackend,
  sessionIsolationVerdict,
} from "../../core/ports/allocation-backend.ts";
import {
  SESSION_MAX_RANKS,
  type SessionAttemptRead,
  type SessionAttemptRecord,
} from "../../core/ports/session-attempts.ts";
import { makeDirBeneath, makeDirsBeneath } from "../../lib/beneath-fs.ts";
import { readTextCapped } from "../../lib/bounded-read.ts";
import type { Clock } from "../../lib/clock.ts";
import { replaceFileSynced } from "../../lib/durable-fs.ts";
import { mintCredentials, type RandomBytes, type SigningKey } from "../../wire/credential.ts";
import { FINGERPRINT_FILE, writeGatewayFingerprint } from "../../wire/gateway-tls.ts";

/** The marker's file name inside the session's workspace. */
const WORKSPACE_MARKER_FILE = ".openai4s-workspace-marker";
/** What the preparer records about an attempt, in its allocation directory. */
export const SESSION_ATTEMPT_FILE = "session-attempt.json";

/** `<allocationDir>/credentials`: the directory whose path (only) is handed to the backend. */
function credentialDirOf(allocationDir: string): string {
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

/**
 * The most an attempt record may weigh: the daemon writes `{"ranks":N}`. Anything larger
 * is not ours and is refused without being read into memory.
 */
const SESSION_ATTEMPT_MAX_BYTES = 4096;

const sessionAttemptSchema = v.strictObject({
  ranks: v.pipe(v.number(), v.safeInteger(), v.minValue(1), v.maxValue(SESSION_MAX_RANKS)),
});

/**
 * The attempt record, from the PRIVATE attempt dir (layout.attemptRecordDir), which no
 * allocation can reach: code in a session could rewrite anything in its allocation dir.
 * Still read with a cap and validated, with `maxRanks` the bound the daemon itself wrote
 * under (the profile's node count): a bad record is an invalid attempt, never a crash.
 */
export function readSessionAttempt(attemptDir: string, maxRanks: number): SessionAttemptRead {
  const path = join(attemptDir, SESSION_ATTEMPT_FILE);
  let read: ReturnType<typeof readTextCapped>;
  try {
    read = readTextCapped(path, SESSION_ATTEMPT_MAX_BYTES);
  } catch (error) {
    return { kind: "Invalid", message: `${path}: ${String(error)}` };
  }
  switch (read.kind) {
    case "Missing":
      return { kind: "Missing" };
    case "TooLarge":
      return {
        kind: "Invalid",
        message: `${path} is ${read.sizeBytes} bytes, over ${SESSION_ATTEMPT_MAX_BYTES}: not a record this daemon wrote`,
      };
    case "NotAFile":
      return { kind: "Invalid", message: `${path} is not a regular file` };
    case "Read":
      break;
    default: {
      const never: never = read;
      throw new Error(`unhandled read ${JSON.stringify(never)}`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(read.text);
  } catch {
    return { kind: "Invalid", message: `${path} is not JSON` };
  }
  const checked = v.safeParse(sessionAttemptSchema, parsed);
  if (!checked.success) {
    return { kind: "Invalid", message: `${path}: ${v.summarize(checked.issues)}` };
  }
  if (checked.output.ranks > maxRanks) {
    return {
      kind: "Invalid",
      message: `${path} claims ${checked.output.ranks} ranks, more than the ${maxRanks} the profile has`,
    };
  }
  return { kind: "Valid", record: checked.output };
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

/** The daemon's worker command and the admin's output cap for the profile's cells. */
function workerArgv(command: readonly string[], profile: ResourceProfile): string[] {
  const cap = profile.maxOutputChars;
  return [...command, ...(cap === undefined ? [] : ["--max-output-chars", String(cap)])];
}

/**
 * The worker's command (the backend appends `--rank-env NAME`; the directory is the
 * preparer's to say) and the environment the session chose: its interpreter and module
 * lines on the worker's argv, its name and paths for the backend's checks and binds.
 */
function workerLaunch(
  workerCommand: readonly string[],
  credentialDir: string,
  choice: EnvironmentChoice,
): {
  readonly workerCommand: readonly string[];
  readonly environment?: { name: string; python: string; prefix: string | null };
} {
  const base = [...workerCommand, "--credential-dir", credentialDir];
  if (choice.kind !== "Found") return { workerCommand: base };
  const { name, python, prefix } = choice.environment;
  return {
    workerCommand: [...base, ...environmentWorkerArgs(choice.environment)],
    environment: { name, python, prefix },
  };
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
      const choice = chooseEnvironment(profile, workload.spec.environment);
      // Admission checked it; the profile changed since (a config reload dropped it).
      if (choice.kind === "Unknown")
        return { kind: "Refused", reason: "SUBMIT_REJECTED", message: choice.message };
      const ranks = profile.resources.nodes;
      const workspaceDir = layout.workspaceDir(workload.id);
      const allocationDir = layout.allocationDir(workload.id, allocation.id);
      const credentialDir = credentialDirOf(allocationDir);
      const attemptDir = layout.attemptRecordDir(workload.id, allocation.id);
      // Spool paths are reached with no link followed; the attempt dir is in the private dir.
      makeDirsBeneath(layout.spool, [workspaceDir, allocationDir], { mode: 0o700 });
      mkdirSync(attemptDir, { recursive: true, mode: 0o700 });
      // 0644: the worker runs as the unprivileged RunAs uid and must read it; the workspace
      // itself (0700, the job's) is what keeps other users out.
      replaceFileSynced(
        workspaceMarkerPath(workspaceDir),
        workspaceMarker(options.key, allocation.id, allocation.epoch),
        { mode: 0o644 },
      );
      const record: SessionAttemptRecord = { ranks };
      // In the private dir: the allocation dir is bound writable into the sandbox.
      replaceFileSynced(join(attemptDir, SESSION_ATTEMPT_FILE), `${JSON.stringify(record)}\n`);
      makeDirBeneath(layout.spool, credentialDir, { mode: 0o700, exactMode: true });
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
            ...workerLaunch(workerArgv(options.workerCommand, profile), credentialDir, choice),
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
