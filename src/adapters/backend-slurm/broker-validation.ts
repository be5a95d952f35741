/**
 * Validation: what may reach an argv. Every value a scheduler command line is built from is
 * checked here first (labels, names, environment, paths, counts); the argv builders
 * (broker-argv.ts) refuse anything that did not pass.
 */
import { CREDENTIAL_ENV_NAME_PATTERN, hijackReasonOf } from "../../core/env-policy.ts";

export type Validation =
  | { readonly kind: "Valid" }
  | { readonly kind: "Invalid"; readonly message: string };
export const VALID: Validation = { kind: "Valid" };
export const invalid = (message: string): Validation => ({ kind: "Invalid", message });

/** Job names and comments: our tokens and nothing that could separate fields or options. */
const JOB_LABEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/**
 * Partition, QoS, account: administrator-chosen names. No comma (a comma makes a list: a
 * second partition the administrator did not choose), no colon, no spaces.
 */
export const SCHEDULER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/**
 * Credential-shaped names (the project-wide rule, src/core/env-policy.ts), checked
 * again here because the broker is where a value would become visible to `scontrol show job`.
 */
const CREDENTIAL_NAME_PATTERN = CREDENTIAL_ENV_NAME_PATTERN;
/**
 * Variables the scheduler's own tools read inside the job (an in-job srun obeys SLURM_NTASKS,
 * SRUN_*, ...): setting them would change how the allocation's tasks start.
 */
export const RESERVED_ENV_PREFIX = /^(SLURM_|SBATCH_|SRUN_|SALLOC_|SPANK_)/i;
const EXPORT_KEYWORDS: ReadonlySet<string> = new Set(["ALL", "NONE", "NIL"]);
const MAX_ENV_VALUE_CHARS = 8192;
const MAX_ENV_ENTRIES = 256;

export function validateJobLabel(what: string, value: string): Validation {
  return JOB_LABEL_PATTERN.test(value)
    ? VALID
    : invalid(
        `${what} must match ${JOB_LABEL_PATTERN.source}, got ${JSON.stringify(value.slice(0, 80))}`,
      );
}

export function validateSchedulerName(what: string, value: string): Validation {
  return SCHEDULER_NAME_PATTERN.test(value)
    ? VALID
    : invalid(
        `${what} must match ${SCHEDULER_NAME_PATTERN.source}, got ${JSON.stringify(value.slice(0, 80))}`,
      );
}

export function validateEnvName(name: string): Validation {
  if (!ENV_NAME_PATTERN.test(name)) {
    return invalid(
      `environment variable name ${JSON.stringify(name.slice(0, 80))} is not an identifier`,
    );
  }
  if (EXPORT_KEYWORDS.has(name.toUpperCase())) {
    return invalid(`environment variable name ${name} reads as an --export keyword`);
  }
  if (CREDENTIAL_NAME_PATTERN.test(name)) {
    return invalid(
      `environment variable ${name} looks like a credential: pass the path to a 0600 file instead`,
    );
  }
  const hijack = hijackReasonOf(name);
  if (hijack !== null) return invalid(`environment variable ${name} is refused: ${hijack}`);
  if (RESERVED_ENV_PREFIX.test(name)) {
    return invalid(`environment variable ${name} is reserved for the scheduler's own tools`);
  }
  return VALID;
}

function validateEnvValue(name: string, value: string): Validation {
  if (value.length > MAX_ENV_VALUE_CHARS) {
    return invalid(`environment variable ${name} is longer than ${MAX_ENV_VALUE_CHARS} characters`);
  }
  if (value.includes(",")) {
    return invalid(`environment variable ${name} contains a comma, the --export separator`);
  }
  // Newline and NUL are named by the design; every other control character is refused with
  // them, since none survives the scheduler's environment handling unchanged.
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    return invalid(`environment variable ${name} contains a control character (newline, NUL, ...)`);
  }
  // Measured on 22.05: sbatch honours quotes when it splits the list, so X=it's,Y=b,Z=it's
  // sets X to "it's,Y=b,Z=it's" and drops Y and Z, and a lone quote is reported as an error
  // while the job is submitted anyway. Either quote lets one value swallow its neighbours.
  if (value.includes("'") || value.includes('"')) {
    return invalid(`environment variable ${name} contains a quote, which --export interprets`);
  }
  if (EXPORT_KEYWORDS.has(value.trim().toUpperCase())) {
    return invalid(`environment variable ${name} reads as the --export keyword ${value.trim()}`);
  }
  return VALID;
}

export function validateEnv(env: Readonly<Record<string, string>>): Validation {
  const entries = Object.entries(env);
  if (entries.length > MAX_ENV_ENTRIES) return invalid(`more than ${MAX_ENV_ENTRIES} variables`);
  for (const [name, value] of entries) {
    if (typeof value !== "string") return invalid(`environment variable ${name} is not a string`);
    const n = validateEnvName(name);
    if (n.kind === "Invalid") return n;
    const v = validateEnvValue(name, value);
    if (v.kind === "Invalid") return v;
  }
  return VALID;
}

/**
 * Every variable of a job's environment the scheduler rules refuse, each with why: the name
 * and value rules of validateEnv, applied one by one so admission can name every bad key.
 * Since launches are wrapped (the job's variables become an `env -i NAME=VALUE` argv inside
 * the batch script) sbatch no longer sees them as its environment, so these rules are applied
 * to what the job is given, before the wrapping: a user's SLURM_NTASKS would otherwise meet
 * the in-job launcher, and a `1,ALL` value a site wrapper that rebuilds an --export list.
 */
export function jobEnvRefusals(
  env: Readonly<Record<string, string>>,
): readonly { readonly name: string; readonly message: string }[] {
  const refusals: { readonly name: string; readonly message: string }[] = [];
  for (const [name, value] of Object.entries(env)) {
    const checked = firstInvalid([validateEnvName(name), validateEnvValue(name, value)]);
    if (checked.kind === "Invalid") refusals.push({ name, message: checked.message });
  }
  return refusals;
}

/**
 * Paths we hand to the scheduler (working directory, log files, the script). Absolute, no
 * control characters, no `%` (sbatch expands %j, %u, ... in --output/--error) and no `\`
 * (which switches that expansion off), no `|` (a field separator in the listings we parse).
 */
export function validatePath(what: string, path: string): Validation {
  if (!path.startsWith("/")) return invalid(`${what} must be an absolute path`);
  if (path.length > 4096) return invalid(`${what} is longer than 4096 characters`);
  if (/[\u0000-\u001f\u007f%\\|]/.test(path)) {
    return invalid(`${what} contains a control character, %, \\ or |`);
  }
  return VALID;
}

export function validateCount(what: string, n: number, min: number, max: number): Validation {
  return Number.isInteger(n) && n >= min && n <= max
    ? VALID
    : invalid(`${what} must be an integer in ${min}..${max}, got ${n}`);
}

export function firstInvalid(checks: readonly Validation[]): Validation {
  return checks.find((c) => c.kind === "Invalid") ?? VALID;
}

/**
 * The one --export option sbatch and srun get: the bare word ALL, the only form that does not
 * imply --get-user-env (see the header). What ALL exports is the process environment the
 * broker builds with jobEnvironment, never the daemon's.
 */
export const EXPORT_OPTION = "--export=ALL";

/**
 * The whole process environment of sbatch/srun, and so of the job: the validated job env and
 * the scheduler's configuration file (the in-job launcher needs it too). Nothing else; in
 * particular no SBATCH_/SRUN_ variable (validateEnv refuses them) that the command would read
 * as an option.
 */
export function jobEnvironment(
  env: Readonly<Record<string, string>>,
  slurmConf: string | undefined,
): Readonly<Record<string, string>> {
  return { ...env, ...(slurmConf === undefined ? {} : { SLURM_CONF: slurmConf }) };
}
