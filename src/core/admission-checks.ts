/**
 * What a normalized submission must fit before admission writes anything: its profile (known,
 * accepting its kind, its time limit, tasks and array size), the owner's unix account for a
 * profile that runs work as its owner, and the backend's own rules for a job's environment.
 * Each refusal names the field as the request spelled it. Pure.
 */
import type { RefusedField, Submission } from "./admission.ts";
import { checkArrayRequest } from "./array/array-request.ts";
import { chooseEnvironment } from "./environments.ts";
import type { ResourceProfile, WorkloadSpec } from "./models.ts";
import type { AllocationBackend } from "./ports/allocation-backend.ts";
import { checkResources } from "./resources.ts";

/** Every field the submission gets wrong against `profiles` and the backend; empty: it fits. */
export function fieldRefusals(
  submission: Submission,
  profiles: readonly ResourceProfile[],
  owner: string | null,
  backend: AllocationBackend,
): readonly RefusedField[] {
  return [
    ...checkAgainstProfile(submission, profiles),
    ...checkOwnerAccount(submission, profiles, owner),
    ...checkAgainstBackendEnvRules(submission, backend),
  ];
}

/**
 * A profile that runs work as its owner's unix account cannot run the admin's (the admin
 * is no account): refused here, naming the profile, rather than failing at its first attempt.
 * A principal without an account is refused at the attempt, which reads the account then.
 */
function checkOwnerAccount(
  submission: Submission,
  profiles: readonly ResourceProfile[],
  owner: string | null,
): readonly RefusedField[] {
  const profile = profiles.find((p) => p.name === submission.profile);
  if (profile?.runAs !== "owner" || owner !== null) return [];
  return [
    {
      path: "profile",
      message: `profile "${profile.name}" runs work as its owner's unix account, and the admin has none: submit with a principal's token`,
    },
  ];
}

/**
 * The profile must exist, accept the kind, and allow the resources, time limit, tasks and
 * array asked for.
 */
function checkAgainstProfile(
  submission: Submission,
  profiles: readonly ResourceProfile[],
): readonly RefusedField[] {
  const profile = profiles.find((p) => p.name === submission.profile);
  if (!profile) {
    const known = profiles.map((p) => p.name).join(", ") || "none";
    return [
      { path: "profile", message: `unknown profile "${submission.profile}" (known: ${known})` },
    ];
  }
  const fields: RefusedField[] = [];
  if (!profile.kinds.includes(submission.kind)) {
    fields.push({
      path: "profile",
      message: `profile "${profile.name}" does not accept ${submission.kind} (it accepts ${profile.kinds.join(", ")})`,
    });
  }
  const bounds = checkResources(
    profile,
    submission.spec.resources,
    submission.spec.timeLimitSeconds,
  );
  if (bounds.kind === "OverMaximum") {
    for (const f of bounds.fields) fields.push({ path: f.path, message: f.message });
  }
  const tasks = submission.spec.tasks ?? 1;
  const maxTasks = profile.maxTasks ?? 1;
  if (tasks > maxTasks) {
    fields.push({
      path: "tasks",
      message:
        maxTasks === 1
          ? `profile "${profile.name}" runs a single task (it sets no max_tasks)`
          : `profile "${profile.name}" allows at most ${maxTasks} tasks`,
    });
  }
  const environment = chooseEnvironment(profile, submission.spec.environment);
  if (environment.kind === "Unknown")
    fields.push({ path: "environment", message: environment.message });
  return [...fields, ...checkArray(submission.spec, profile)];
}

/** An array fits the profile's limit, its cap fits the array; nothing to say without one. */
function checkArray(spec: WorkloadSpec, profile: ResourceProfile): readonly RefusedField[] {
  if (spec.array === undefined) return [];
  if (profile.maxArraySize === undefined) {
    return [{ path: "array", message: `profile "${profile.name}" does not run job arrays` }];
  }
  const check = checkArrayRequest(spec.array, spec.maxConcurrent, profile.maxArraySize);
  return check.kind === "Invalid" ? [{ path: check.field, message: check.message }] : [];
}

/**
 * The backend's own rules for a job's environment (a scheduler's reserved names, values its
 * tools would re-read as lists), one refused field per variable. At admission, so a bad
 * variable is a 400 naming it rather than a workload that fails at its first submission.
 */
function checkAgainstBackendEnvRules(
  submission: Submission,
  backend: AllocationBackend,
): readonly RefusedField[] {
  const env = submission.spec.env;
  const policy = backend.capabilities.jobEnv;
  if (env === undefined || policy === null) return [];
  return policy.jobEnvRefusals(env).map((r) => ({
    path: `env.${r.name}`,
    message: `on the ${backend.name} backend: ${r.message}`,
  }));
}
