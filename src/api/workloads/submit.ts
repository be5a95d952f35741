/**
 * POST /v1/workloads. Everything is checked before anything is written: shape, cross-field
 * rules, the profile, and for a SESSION the backend's isolation capability. A refusal leaves
 * no row and no file behind, because a half-admitted workload is one the reconciler would
 * then try to run.
 */
import { createHash } from "node:crypto";
import type {
  ResourceProfile,
  Workload,
  WorkloadKind,
  WorkloadSpec,
} from "../../orchestration/models.ts";
import { sessionIsolationVerdict } from "../../orchestration/ports.ts";
import { createWorkload, findWorkloadByIdempotencyKey } from "../../store/index.ts";
import type { ApiDeps } from "../deps.ts";
import { ApiError, type FieldError, validationFailed } from "../problem.ts";
import { mintWorkloadId } from "./ids.ts";
import { IDEMPOTENCY_KEY_PATTERN, NAME_PATTERN, type SubmitBody } from "./schemas.ts";

/** The request after defaults: what is stored, and what the idempotency hash covers. */
export interface Submission {
  readonly kind: WorkloadKind;
  readonly profile: string;
  readonly name: string;
  readonly spec: WorkloadSpec;
  readonly maxAttempts: number;
}

export type SubmitOutcome =
  | { readonly kind: "Created"; readonly workload: Workload }
  /** Same Idempotency-Key, same request: the workload the first call created. */
  | { readonly kind: "Replayed"; readonly workload: Workload };

export function parseIdempotencyKey(header: string | undefined): string | null {
  if (header === undefined) return null;
  if (!IDEMPOTENCY_KEY_PATTERN.test(header)) {
    throw validationFailed([
      {
        path: "Idempotency-Key",
        message: "must be 1 to 200 printable ASCII characters without spaces",
      },
    ]);
  }
  return header;
}

/** Rules between fields, which a per-field schema cannot state. Pure: no store, no backend. */
export function normalize(body: SubmitBody): Submission {
  const errors: FieldError[] = [];
  if (body.kind === "BATCH") {
    if (body.command === undefined) {
      errors.push({ path: "command", message: "a BATCH workload needs a command" });
    } else if (body.command[0] === "") {
      errors.push({ path: "command[0]", message: "the program must not be empty" });
    }
    if (body.idleTimeoutSeconds !== undefined) {
      errors.push({ path: "idleTimeoutSeconds", message: "only a SESSION has an idle timeout" });
    }
  } else if (body.command !== undefined) {
    errors.push({ path: "command", message: "a SESSION runs a kernel, not a command" });
  }
  if (errors.length > 0) throw validationFailed(errors);
  const spec: WorkloadSpec = {
    ...(body.command !== undefined ? { command: [...body.command] } : {}),
    ...(body.env !== undefined ? { env: sortedRecord(body.env) } : {}),
    ...(body.timeLimitSeconds !== undefined ? { timeLimitSeconds: body.timeLimitSeconds } : {}),
    ...(body.idleTimeoutSeconds !== undefined
      ? { idleTimeoutSeconds: body.idleTimeoutSeconds }
      : {}),
  };
  return {
    kind: body.kind,
    profile: body.profile,
    name: body.name ?? defaultName(body),
    spec,
    maxAttempts: body.maxAttempts ?? 1,
  };
}

function sortedRecord(record: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(record).sort()) out[key] = record[key] as string;
  return out;
}

/** The program's base name when it fits the name charset, else the kind in lower case. */
function defaultName(body: SubmitBody): string {
  const program = body.command?.[0]?.split("/").at(-1) ?? "";
  const candidate = program.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 63);
  return NAME_PATTERN.test(candidate) ? candidate : body.kind.toLowerCase();
}

/**
 * sha256 of the canonical JSON of the normalized request: key order and spelled-out
 * defaults (`maxAttempts: 1`) do not make two equal requests differ.
 */
export function requestHash(submission: Submission): string {
  return createHash("sha256").update(canonicalJson(submission)).digest("hex");
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The profile must exist, accept the kind, and allow the time limit asked for. */
export function checkAgainstProfile(
  submission: Submission,
  profiles: readonly ResourceProfile[],
): void {
  const profile = profiles.find((p) => p.name === submission.profile);
  if (!profile) {
    const known = profiles.map((p) => p.name).join(", ") || "none";
    throw validationFailed([
      { path: "profile", message: `unknown profile "${submission.profile}" (known: ${known})` },
    ]);
  }
  const errors: FieldError[] = [];
  if (!profile.kinds.includes(submission.kind)) {
    errors.push({
      path: "profile",
      message: `profile "${profile.name}" does not accept ${submission.kind} (it accepts ${profile.kinds.join(", ")})`,
    });
  }
  const limit = profile.resources.timeLimitSeconds;
  const asked = submission.spec.timeLimitSeconds;
  if (limit !== null && asked !== undefined && asked > limit) {
    errors.push({
      path: "timeLimitSeconds",
      message: `profile "${profile.name}" allows at most ${limit} seconds`,
    });
  }
  if (errors.length > 0) throw validationFailed(errors);
}

function idempotencyConflict(key: string): ApiError {
  return new ApiError({
    status: 409,
    slug: "idempotency-key-reused",
    title: "Idempotency-Key reused with a different request",
    detail: `Idempotency-Key "${key}" was first used with a different request body`,
  });
}

function replayOrConflict(deps: ApiDeps, key: string, hash: string): SubmitOutcome | null {
  const match = findWorkloadByIdempotencyKey(deps.store, key);
  if (!match) return null;
  if (match.requestHash !== hash) throw idempotencyConflict(key);
  return { kind: "Replayed", workload: match.workload };
}

/** SQLite's words for the unique index on the key: another request won the insert race. */
function isIdempotencyKeyCollision(error: unknown): boolean {
  return (
    error instanceof Error &&
    /UNIQUE constraint failed: workloads\.idempotency_key/.test(error.message)
  );
}

export async function submitWorkload(
  deps: ApiDeps,
  submission: Submission,
  idempotencyKey: string | null,
): Promise<SubmitOutcome> {
  const hash = requestHash(submission);
  if (idempotencyKey !== null) {
    const earlier = replayOrConflict(deps, idempotencyKey, hash);
    if (earlier) return earlier;
  }
  checkAgainstProfile(submission, deps.backend.profiles());
  if (submission.kind === "SESSION") {
    // Before any write: a missing, Unverified or throwing check all refuse the same way.
    const verdict = await sessionIsolationVerdict(deps.backend);
    if (verdict.kind === "Unverified") {
      throw new ApiError({
        status: 409,
        slug: "isolation-unavailable",
        title: "Sessions cannot be placed on this backend",
        detail: verdict.message,
        extensions: { reason: "ISOLATION_UNAVAILABLE" },
      });
    }
  }
  const id = (deps.newWorkloadId ?? mintWorkloadId)();
  try {
    const workload = createWorkload(deps.store, {
      id,
      kind: submission.kind,
      name: submission.name,
      profile: submission.profile,
      spec: submission.spec,
      maxAttempts: submission.maxAttempts,
      idempotencyKey,
      requestHash: hash,
    });
    return { kind: "Created", workload };
  } catch (error) {
    // Two requests with one key both found nothing and both inserted; the unique index let
    // one through. The loser answers exactly as if it had arrived second.
    if (idempotencyKey !== null && isIdempotencyKeyCollision(error)) {
      const winner = replayOrConflict(deps, idempotencyKey, hash);
      if (winner) return winner;
    }
    throw error;
  }
}
