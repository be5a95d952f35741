/**
 * POST /v1/workloads, the HTTP side. The request's shape is checked here (schemas.ts); the
 * kind rules between fields and whether it is admitted (profile, isolation, idempotency) are
 * the core's (core/admission.ts), whose refusals this maps to problem+json.
 * Everything is checked before anything is written.
 */
import {
  type AdmissionOutcome,
  type AdmissionRefusal,
  admitWorkload,
  normalizeSubmission,
  type Submission,
  type Submitter,
} from "../../../core/admission.ts";
import type { ApiDeps } from "../deps.ts";
import { ApiError, validationFailed } from "../problem.ts";
import { breakerStates } from "../profiles/profile-view.ts";
import { mintWorkloadId } from "./ids.ts";
import { IDEMPOTENCY_KEY_PATTERN, type SubmitBody } from "./schemas.ts";

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

/** The kind rules between fields (core/admission.ts); a refusal is thrown as 400. */
export function normalize(body: SubmitBody): Submission {
  const normalized = normalizeSubmission(body);
  if (normalized.kind === "Refused") throw admissionProblem(normalized);
  return normalized.submission;
}

/**
 * Problem+json for each refusal of admission: the statuses and bodies clients rely on
 * (400 validation-failed with the fields, 409 idempotency-key-reused, 409
 * isolation-unavailable with its reason code).
 */
function admissionProblem(refusal: AdmissionRefusal): ApiError {
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
        title: "This workload cannot be isolated on this backend",
        detail: refusal.message,
        extensions: { reason: "ISOLATION_UNAVAILABLE" },
      });
    case "UNKNOWN_DEPENDENCY":
      // 404 with the fields named, as a missing workload anywhere else: another principal's
      // workload is answered exactly the same (app.ts refuseForeign's rule).
      return new ApiError({
        status: 404,
        slug: "not-found",
        title: "Not found",
        detail: `not found: ${refusal.fields.map((f) => f.path).join(", ")}`,
        errors: refusal.fields,
      });
    case "OVER_LIMIT":
      return new ApiError({
        status: 429,
        slug: "limit-exceeded",
        title: "Limit exceeded",
        detail: `this principal's ${refusal.limit} limit is ${refusal.max} and it holds ${refusal.current}; cancel a workload or ask the admin to raise it`,
        extensions: { limit: refusal.limit, current: refusal.current, max: refusal.max },
      });
    default: {
      const never: never = refusal;
      throw new Error(`unhandled admission refusal ${JSON.stringify(never)}`);
    }
  }
}

function degraded(deps: ApiDeps, profile: string): boolean {
  return breakerStates(deps.reconciler).get(profile)?.kind === "Open";
}

/** Admission (core/admission.ts) for a request; a refusal is thrown as its problem. */
export async function submitWorkload(
  deps: ApiDeps,
  submission: Submission,
  idempotencyKey: string | null,
  submitter?: Submitter,
): Promise<SubmitOutcome> {
  const outcome = await admitWorkload(
    {
      store: deps.admission,
      backend: deps.backend,
      newWorkloadId: deps.newWorkloadId ?? mintWorkloadId,
      // A degraded profile's workload starts PENDING: no attempt to hand over (the tick
      // holds its profile's submissions until the breaker's back-off has passed).
      ...(deps.reconciler.newAttemptIds === undefined || degraded(deps, submission.profile)
        ? {}
        : { newAttempt: deps.reconciler.newAttemptIds }),
    },
    submission,
    idempotencyKey,
    submitter,
  );
  if (outcome.kind === "Refused") throw admissionProblem(outcome);
  return outcome;
}
