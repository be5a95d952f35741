/**
 * POST /v1/workloads, the HTTP side. The request's shape and cross-field rules are checked
 * here; whether it is admitted (profile, kinds, isolation, idempotency) is the core's rule
 * (orchestration/admission.ts), whose refusals this maps to problem+json. Everything is
 * checked before anything is written.
 */
import {
  type AdmissionOutcome,
  type AdmissionRefusal,
  admitWorkload,
  type Submission,
} from "../../orchestration/admission.ts";
import type { WorkloadSpec } from "../../orchestration/models.ts";
import { bindAdmissionStore } from "../../store/adapters/admission-store.ts";
import type { ApiDeps } from "../deps.ts";
import { ApiError, type FieldError, validationFailed } from "../problem.ts";
import { mintWorkloadId } from "./ids.ts";
import { IDEMPOTENCY_KEY_PATTERN, NAME_PATTERN, type SubmitBody } from "./schemas.ts";

export type SubmitOutcome = Exclude<AdmissionOutcome, { readonly kind: "Refused" }>;

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
 * Problem+json for each refusal of admission: the statuses and bodies clients rely on
 * (400 validation-failed with the fields, 409 idempotency-key-reused, 409
 * isolation-unavailable with its reason code).
 */
export function admissionProblem(refusal: AdmissionRefusal): ApiError {
  switch (refusal.reason) {
    case "INVALID":
      return validationFailed(refusal.fields);
    case "IDEMPOTENCY_KEY_REUSED":
      return new ApiError({
        status: 409,
        slug: "idempotency-key-reused",
        title: "Idempotency-Key reused with a different request",
        detail: `Idempotency-Key "${refusal.key}" was first used with a different request body`,
      });
    case "ISOLATION_UNAVAILABLE":
      return new ApiError({
        status: 409,
        slug: "isolation-unavailable",
        title: "Sessions cannot be placed on this backend",
        detail: refusal.message,
        extensions: { reason: "ISOLATION_UNAVAILABLE" },
      });
    default: {
      const never: never = refusal;
      throw new Error(`unhandled admission refusal ${JSON.stringify(never)}`);
    }
  }
}

/** Admission (orchestration/admission.ts) for a request; a refusal is thrown as its problem. */
export async function submitWorkload(
  deps: ApiDeps,
  submission: Submission,
  idempotencyKey: string | null,
): Promise<SubmitOutcome> {
  const outcome = await admitWorkload(
    {
      store: bindAdmissionStore(deps.store),
      backend: deps.backend,
      newWorkloadId: deps.newWorkloadId ?? mintWorkloadId,
    },
    submission,
    idempotencyKey,
  );
  if (outcome.kind === "Refused") throw admissionProblem(outcome);
  return outcome;
}
