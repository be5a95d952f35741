/**
 * Admission: whether a normalized submission becomes a workload. Everything is decided before
 * anything is written (the profile, the kinds it accepts, its time limit, and for a SESSION
 * the backend's isolation verdict), so a refusal leaves no row behind: a half-admitted
 * workload is one the reconciler would then try to run. An Idempotency-Key makes a repeat
 * of the same request answer the first one's workload, and a different request under the
 * same key a refusal, also when the two raced to the insert.
 *
 * A rule, not a handler: it returns a union and the edges translate it (the API to
 * problem+json), so the CLI path and tests use it without a web server.
 *
 * What a submission must fit (its profile, its owner's account, the backend's environment
 * rules) is admission-checks.ts.
 */
import { createHash } from "node:crypto";
import { fieldRefusals } from "./admission-checks.ts";
import { type Dependency, dependenciesOf } from "./dependencies.ts";
import {
  type Allocation,
  attemptMessage,
  type Workload,
  type WorkloadKind,
  type WorkloadSpec,
} from "./models.ts";
import type { AdmissionStore, AttemptIds, IdempotentMatch } from "./ports/admission-store.ts";
import {
  type AllocationBackend,
  batchRefusal,
  sessionIsolationVerdict,
} from "./ports/allocation-backend.ts";
import {
  type LimitExceeded,
  limitExceeded,
  type PrincipalLimits,
  resourcesHeld,
} from "./principals.ts";
import { askedResources, effectiveResources } from "./resources.ts";

/** The request after defaults: what is stored, and what the idempotency hash covers. */
export interface Submission {
  readonly kind: WorkloadKind;
  readonly profile: string;
  readonly name: string;
  readonly spec: WorkloadSpec;
  readonly maxAttempts: number;
  /** Created held until released (staged input); absent: runs as soon as it may. */
  readonly held?: true;
  /** The workloads it runs after; absent: none. */
  readonly after?: readonly Dependency[];
}

/** A workload's name: what listings show, and the default derived from the program. */
export const WORKLOAD_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** A submission as asked, each field already valid on its own (the API's schema did that). */
export interface SubmissionRequest {
  readonly kind: WorkloadKind;
  readonly profile: string;
  readonly name?: string | undefined;
  readonly command?: readonly string[] | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly timeLimitSeconds?: number | undefined;
  readonly resources?:
    | {
        readonly cpus?: number | undefined;
        readonly memoryMb?: number | undefined;
        readonly gpus?: number | undefined;
      }
    | undefined;
  readonly idleTimeoutSeconds?: number | undefined;
  readonly maxAttempts?: number | undefined;
  readonly array?: number | undefined;
  readonly maxConcurrent?: number | undefined;
  readonly tasks?: number | undefined;
  readonly tasksPerNode?: number | undefined;
  readonly environment?: string | undefined;
  readonly hold?: boolean | undefined;
  readonly afterOk?: readonly string[] | undefined;
  readonly afterAny?: readonly string[] | undefined;
}

/** One refused field: `path` names it as the request spelled it. */
export interface RefusedField {
  readonly path: string;
  readonly message: string;
}

export type AdmissionRefusal =
  /** The submission does not fit the profile (unknown, wrong kind, time limit too long). */
  | { readonly reason: "INVALID"; readonly fields: readonly RefusedField[] }
  /** The Idempotency-Key was first used with a different request. */
  | { readonly reason: "IDEMPOTENCY_KEY_REUSED"; readonly key: string }
  /**
   * A SESSION on a backend that cannot verify its isolation, or a BATCH whose job would run
   * as the daemon's own uid without a verified sandbox.
   */
  | { readonly reason: "ISOLATION_UNAVAILABLE"; readonly message: string }
  /**
   * A dependency names a workload that does not exist or is another principal's (404: the
   * same answer for both, so a principal cannot probe others' ids).
   */
  | { readonly reason: "UNKNOWN_DEPENDENCY"; readonly fields: readonly RefusedField[] }
  /** The owner already holds what one of its limits allows (429). */
  | ({ readonly reason: "OVER_LIMIT" } & LimitExceeded);

/** Who submits: the admin (no owner, no limits) or a principal with its limits. */
export interface Submitter {
  readonly owner: string | null;
  readonly limits: PrincipalLimits | null;
}

const ADMIN_SUBMITTER: Submitter = Object.freeze({ owner: null, limits: null });

export type AdmissionOutcome =
  | {
      readonly kind: "Admitted";
      readonly workload: Workload;
      /** Its first attempt, minted with it (`AdmissionDeps.newAttempt`), or null. */
      readonly attempt: Allocation | null;
    }
  /** Same Idempotency-Key, same request: the workload the first call created. */
  | { readonly kind: "Replayed"; readonly workload: Workload }
  | ({ readonly kind: "Refused" } & AdmissionRefusal);

export interface AdmissionDeps {
  readonly store: AdmissionStore;
  readonly backend: AllocationBackend;
  readonly newWorkloadId: () => string;
  /**
   * Ids for the first attempt, which is then minted in the transaction that creates the
   * workload: one commit fewer between a POST and the backend, and an attempt the reconciler
   * can hand over at once (`Reconciler.admitted`). Absent: the workload starts PENDING and
   * the reconciler mints.
   */
  readonly newAttempt?: () => AttemptIds;
}

export type NormalizeOutcome =
  | { readonly kind: "Normalized"; readonly submission: Submission }
  | {
      readonly kind: "Refused";
      readonly reason: "INVALID";
      readonly fields: readonly RefusedField[];
    };

/**
 * The kind rules between fields, which a per-field schema cannot state (a BATCH runs a
 * command, a SESSION a kernel; only a SESSION idles), then the defaults spelled out. Pure.
 */
export function normalizeSubmission(request: SubmissionRequest): NormalizeOutcome {
  const fields: RefusedField[] = [];
  if (request.kind === "BATCH") {
    if (request.command === undefined) {
      fields.push({ path: "command", message: "a BATCH workload needs a command" });
    } else if (request.command[0] === "") {
      fields.push({ path: "command[0]", message: "the program must not be empty" });
    }
    if (request.idleTimeoutSeconds !== undefined) {
      fields.push({ path: "idleTimeoutSeconds", message: "only a SESSION has an idle timeout" });
    }
    fields.push(...taskFields(request));
    if (request.environment !== undefined) {
      fields.push({
        path: "environment",
        message: "an environment is a SESSION's kernel's; a BATCH command chooses its own",
      });
    }
  } else {
    if (request.command !== undefined) {
      fields.push({ path: "command", message: "a SESSION runs a kernel, not a command" });
    }
    // A session's ranks are its profile's nodes (one worker each), never the request's.
    for (const path of ["tasks", "tasksPerNode"] as const) {
      if (request[path] !== undefined) {
        fields.push({ path, message: "only a BATCH workload runs as several tasks" });
      }
    }
  }
  if (request.kind !== "BATCH") {
    for (const path of ["afterOk", "afterAny"] as const) {
      if (request[path] !== undefined && request[path].length > 0) {
        fields.push({ path, message: "only a BATCH workload runs after others" });
      }
    }
  }
  if (request.kind !== "BATCH" && request.array !== undefined) {
    fields.push({ path: "array", message: "only a BATCH workload runs as a job array" });
  }
  if (request.maxConcurrent !== undefined && request.array === undefined) {
    fields.push({
      path: "maxConcurrent",
      message: "maxConcurrent caps a job array: give array too",
    });
  }
  if (fields.length > 0) return { kind: "Refused", reason: "INVALID", fields };
  const spec: WorkloadSpec = {
    ...(request.command !== undefined ? { command: [...request.command] } : {}),
    ...(request.env !== undefined ? { env: sortedRecord(request.env) } : {}),
    ...(request.timeLimitSeconds !== undefined
      ? { timeLimitSeconds: request.timeLimitSeconds }
      : {}),
    ...askedResources(request.resources),
    ...(request.idleTimeoutSeconds !== undefined
      ? { idleTimeoutSeconds: request.idleTimeoutSeconds }
      : {}),
    ...(request.array !== undefined ? { array: request.array } : {}),
    ...(request.environment !== undefined ? { environment: request.environment } : {}),
    ...(request.maxConcurrent !== undefined ? { maxConcurrent: request.maxConcurrent } : {}),
    // `tasks: 1` is the single-task form spelled out: stored as absent, so both are one
    // request (the same idempotency hash) and run exactly as a BATCH always has.
    ...(request.tasks !== undefined && request.tasks > 1 ? { tasks: request.tasks } : {}),
    ...(request.tasks !== undefined && request.tasks > 1 && request.tasksPerNode !== undefined
      ? { tasksPerNode: request.tasksPerNode }
      : {}),
  };
  const after = dependenciesOf(request.afterOk, request.afterAny);
  return {
    kind: "Normalized",
    submission: {
      kind: request.kind,
      profile: request.profile,
      name: request.name ?? defaultName(request),
      spec,
      maxAttempts: request.maxAttempts ?? 1,
      ...(request.hold === true ? { held: true } : {}),
      ...(after.length > 0 ? { after } : {}),
    },
  };
}

/** `tasksPerNode` spreads `tasks`: meaningless without them, and never more than them. */
function taskFields(request: SubmissionRequest): readonly RefusedField[] {
  const { tasks, tasksPerNode } = request;
  if (tasksPerNode === undefined) return [];
  if (tasks === undefined) {
    return [{ path: "tasksPerNode", message: "needs tasks (how many in all)" }];
  }
  if (tasksPerNode > tasks) {
    return [{ path: "tasksPerNode", message: `must be at most tasks (${tasks})` }];
  }
  return [];
}

function sortedRecord(record: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(record).sort()) out[key] = record[key] as string;
  return out;
}

/** The program's base name when it fits the name charset, else the kind in lower case. */
function defaultName(request: SubmissionRequest): string {
  const program = request.command?.[0]?.split("/").at(-1) ?? "";
  const candidate = program.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 63);
  return WORKLOAD_NAME_PATTERN.test(candidate) ? candidate : request.kind.toLowerCase();
}

/**
 * sha256 of the canonical JSON of the normalized request: key order and spelled-out
 * defaults (`maxAttempts: 1`) do not make two equal requests differ.
 */
export function requestHash(submission: Submission): string {
  return createHash("sha256").update(canonicalJson(submission)).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The earlier request's workload when it was this request, else the refusal. */
function replayOrRefuse(
  key: string,
  match: IdempotentMatch,
  hash: string,
  owner: string | null,
): AdmissionOutcome {
  // The store finds only the owner's own keys; the owner check stays as a second lock: a
  // replay across owners would hand one principal another's workload.
  if (match.requestHash !== hash || (match.workload.owner ?? null) !== owner) {
    return { kind: "Refused", reason: "IDEMPOTENCY_KEY_REUSED", key };
  }
  return { kind: "Replayed", workload: match.workload };
}

export async function admitWorkload(
  deps: AdmissionDeps,
  submission: Submission,
  idempotencyKey: string | null,
  submitter: Submitter = ADMIN_SUBMITTER,
): Promise<AdmissionOutcome> {
  const hash = requestHash(submission);
  const owner = submitter.owner;
  if (idempotencyKey !== null) {
    const earlier = deps.store.findByIdempotencyKey(owner, idempotencyKey);
    if (earlier) return replayOrRefuse(idempotencyKey, earlier, hash, owner);
  }
  const unknown = unknownDependencies(deps.store, submission.after ?? [], owner);
  if (unknown.length > 0) return { kind: "Refused", reason: "UNKNOWN_DEPENDENCY", fields: unknown };
  const profiles = deps.backend.profiles();
  const fields = fieldRefusals(submission, profiles, owner, deps.backend);
  if (fields.length > 0) return { kind: "Refused", reason: "INVALID", fields };
  if (submission.kind === "SESSION") {
    // Before any write: a missing, Unverified or throwing check all refuse the same way.
    const verdict = await sessionIsolationVerdict(deps.backend);
    if (verdict.kind === "Unverified") {
      return { kind: "Refused", reason: "ISOLATION_UNAVAILABLE", message: verdict.message };
    }
  } else {
    const refusal = batchRefusal(deps.backend);
    if (refusal !== null) {
      return { kind: "Refused", reason: "ISOLATION_UNAVAILABLE", message: refusal };
    }
  }
  const resources = profiles.find((p) => p.name === submission.profile)?.resources;
  // What was asked, not the profile's default: a principal held to 8 CPUs asking 8 each time
  // on a 1-CPU default would otherwise hold 8 times its limit.
  const { cpus, gpus } =
    resources === undefined
      ? { cpus: 0, gpus: 0 }
      : resourcesHeld(effectiveResources(resources, submission.spec.resources), submission.spec);
  const limits = submitter.limits;
  const created = await deps.store.create({
    owner,
    cpus,
    gpus,
    ...(limits === null
      ? {}
      : {
          withinLimits: (usage) =>
            limitExceeded(limits, usage, { kind: submission.kind, cpus, gpus }),
        }),
    id: deps.newWorkloadId(),
    kind: submission.kind,
    name: submission.name,
    profile: submission.profile,
    spec: submission.spec,
    maxAttempts: submission.maxAttempts,
    idempotencyKey,
    requestHash: hash,
    ...(submission.held === true ? { held: true } : {}),
    ...(submission.after === undefined ? {} : { after: submission.after }),
    // Held or dependent: the reconciler mints its first attempt once it may run.
    ...(deps.newAttempt === undefined || submission.held === true || submission.after !== undefined
      ? {}
      : {
          firstAttempt: {
            ...deps.newAttempt(),
            message: attemptMessage(1, submission.maxAttempts),
          },
        }),
  });
  switch (created.kind) {
    case "Created":
      return { kind: "Admitted", workload: created.workload, attempt: created.attempt };
    case "KeyTaken":
      // Both requests found nothing and both inserted; the loser answers exactly as if it
      // had arrived second.
      if (idempotencyKey === null) throw new Error("the store reported a taken key for none");
      return replayOrRefuse(idempotencyKey, created.existing, hash, owner);
    case "OverLimit":
      return { kind: "Refused", reason: "OVER_LIMIT", ...created.exceeded };
    default: {
      const never: never = created;
      throw new Error(`unhandled create result ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The dependencies naming a workload the submitter may not see: missing, or (for a
 * principal) another's. The admin may name any. One message for both, so the answer says
 * nothing about another principal's ids. A cycle cannot be formed: ids are the server's,
 * minted at creation, and dependencies are fixed then, so every parent is older.
 */
function unknownDependencies(
  store: AdmissionStore,
  after: readonly Dependency[],
  owner: string | null,
): RefusedField[] {
  if (after.length === 0) return [];
  const owners = store.ownersOf(after.map((d) => d.workloadId));
  const fields: RefusedField[] = [];
  const index = { afterok: 0, afterany: 0 };
  for (const dep of after) {
    const path = `${dep.kind === "afterok" ? "afterOk" : "afterAny"}[${index[dep.kind]++}]`;
    const found = owners.has(dep.workloadId);
    if (found && (owner === null || owners.get(dep.workloadId) === owner)) continue;
    fields.push({ path, message: `no workload ${JSON.stringify(dep.workloadId)}` });
  }
  return fields;
}
