/**
 * Request schemas of the workload routes. Limits are named constants because the OpenAPI
 * document states the same numbers: one source, so the two cannot drift apart.
 *
 * Over 400 lines because each field's description is the API reference's text (the OpenAPI
 * document is generated from these schemas): splitting would scatter one route's shape.
 */
import * as v from "valibot";
import { WORKLOAD_NAME_PATTERN } from "../../../core/admission.ts";
import { envNameRefusal } from "../../../core/env-policy.ts";
import { PHASES, WORKLOAD_KINDS } from "../../../core/models.ts";
import { noNul } from "../validation.ts";
import { ResourcesBody } from "./resource-schema.ts";

export const LIMITS = {
  nameMaxLength: 63,
  profileMaxLength: 64,
  commandMaxArgs: 1024,
  argMaxLength: 32 * 1024,
  envMaxEntries: 256,
  envKeyMaxLength: 128,
  envValueMaxLength: 32 * 1024,
  /** A year: beyond that a number is a unit mistake (ms for s), not a plan. */
  timeLimitMaxSeconds: 366 * 24 * 3600,
  idleTimeoutMinSeconds: 60,
  idleTimeoutMaxSeconds: 30 * 24 * 3600,
  maxAttemptsMax: 10,
  /** The scheduler's own ceiling on a job's task count is far above any profile's. */
  tasksMax: 1_000_000,
  /** Workloads one submission may run after, per kind (afterOk, afterAny). */
  dependenciesMax: 64,
  codeMaxLength: 512 * 1024,
  /** A cell's own output cap: up to the largest a profile may set (100 million). */
  maxOutputCharsMax: 100_000_000,
  taskTimeoutMaxSeconds: 24 * 3600,
  taskTimeoutDefaultSeconds: 600,
  listLimitMax: 500,
  listLimitDefault: 50,
  idempotencyKeyMaxLength: 200,
  logTailMaxLines: 1_000_000,
  logAttemptMax: 1_000_000,
} as const;

/**
 * Names travel into backend job names and log lines: a small charset, starting with an
 * alphanumeric so a name can never read as an option (`-x`) or a hidden file.
 */
/** One pattern for a name, whoever checks it (the schema here, the default in admission). */
const NAME_PATTERN = WORKLOAD_NAME_PATTERN;
const ENV_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The daemon's own launch variables use this prefix; a user value must not shadow them. */
export const RESERVED_ENV_PREFIX = "OPENAI4S_";
/** A backend's job id as the views show it: a short token, never free text. */
export const BACKEND_JOB_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;
/** Printable ASCII without spaces: a key is an opaque token a client chose. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,200}$/;

/** Above any scheduler's array limit; the profile's own limit is checked at admission. */
const ARRAY_MAX_ELEMENTS = 4_000_001;

const positiveInteger = (max: number) =>
  v.pipe(v.number(), v.integer("must be an integer"), v.minValue(1), v.maxValue(max));

const argument = v.pipe(v.string(), v.maxLength(LIMITS.argMaxLength), noNul("an argument"));

const envKey = v.pipe(
  v.string(),
  v.maxLength(LIMITS.envKeyMaxLength),
  v.regex(ENV_KEY_PATTERN, "must match ^[A-Za-z_][A-Za-z0-9_]*$"),
  v.check(
    (k: string) => !k.toUpperCase().startsWith(RESERVED_ENV_PREFIX),
    `names starting with ${RESERVED_ENV_PREFIX} are reserved for the daemon`,
  ),
  // Credential-shaped and loader/shell-hijack names (LD_PRELOAD, BASH_ENV, ...): the
  // message names the key and why (src/core/env-policy.ts).
  v.check(
    (k: string) => envNameRefusal(k) === null,
    (issue) => envNameRefusal(String(issue.input)) ?? "refused",
  ),
);

const envValue = v.pipe(v.string(), v.maxLength(LIMITS.envValueMaxLength), noNul("a value"));

/**
 * Keys valibot's record skips without an issue (its guard against prototype pollution):
 * `{"env": {"constructor": "x"}}` would otherwise be accepted and the variable silently
 * dropped, which is "ignored", never allowed for a request field. `__proto__` and friends
 * are legal variable names, but no job needs them and storing them safely is not worth it.
 */
const UNSTORABLE_KEYS: readonly string[] = ["__proto__", "constructor", "prototype"];

const envObject = v.pipe(
  v.custom<Readonly<Record<string, unknown>>>(
    (x) => typeof x === "object" && x !== null && !Array.isArray(x),
    "must be an object of NAME: value",
  ),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    for (const key of Object.keys(dataset.value)) {
      if (!UNSTORABLE_KEYS.includes(key)) continue;
      addIssue({
        message: `"${key}" is not accepted as a variable name`,
        path: [{ type: "object", origin: "key", input: dataset.value, key, value: key }],
      });
    }
  }),
  v.record(envKey, envValue),
);

/** A dependency's workload ids: a few, each an id's length (looked up, never interpreted). */
const dependencyIds = v.pipe(
  v.array(v.pipe(v.string(), v.minLength(1), v.maxLength(128), noNul("a workload id"))),
  v.maxLength(LIMITS.dependenciesMax, `at most ${LIMITS.dependenciesMax} workloads`),
);

export const SubmitBody = v.strictObject({
  kind: v.pipe(v.picklist(WORKLOAD_KINDS), v.description("SESSION or BATCH.")),
  profile: v.pipe(
    v.string(),
    v.minLength(1),
    v.maxLength(LIMITS.profileMaxLength),
    v.description("A profile from GET /v1/profiles that accepts this kind."),
  ),
  name: v.optional(
    v.pipe(
      v.string(),
      v.regex(NAME_PATTERN, "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"),
      v.description("A name for listings."),
    ),
  ),
  command: v.optional(
    v.pipe(
      v.array(argument),
      v.minLength(1, "must not be empty"),
      v.maxLength(LIMITS.commandMaxArgs),
      v.description("argv, run without a shell; required for BATCH, refused for SESSION."),
    ),
  ),
  env: v.optional(
    v.pipe(
      envObject,
      v.check(
        (env) => Object.keys(env).length <= LIMITS.envMaxEntries,
        `at most ${LIMITS.envMaxEntries} variables`,
      ),
      v.description(
        "Environment of the job. Names starting with OPENAI4S_ and credential-shaped names are refused.",
      ),
    ),
  ),
  environment: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"),
      v.description(
        "SESSION: one of the profile's environments (GET /v1/profiles); the kernel runs its interpreter. Absent: the node's python3.",
      ),
    ),
  ),
  timeLimitSeconds: v.optional(
    v.pipe(
      positiveInteger(LIMITS.timeLimitMaxSeconds),
      v.description("At most the profile's maxTimeLimitSeconds; absent: its timeLimitSeconds."),
    ),
  ),
  resources: ResourcesBody,
  idleTimeoutSeconds: v.optional(
    v.pipe(
      v.number(),
      v.integer("must be an integer"),
      v.minValue(LIMITS.idleTimeoutMinSeconds),
      v.maxValue(LIMITS.idleTimeoutMaxSeconds),
      v.description("SESSION only: end the session after this long without a user."),
    ),
  ),
  maxAttempts: v.optional(
    v.pipe(
      positiveInteger(LIMITS.maxAttemptsMax),
      v.description("Attempts after node failures or preemption (default 1)."),
    ),
  ),
  array: v.optional(
    v.pipe(
      positiveInteger(ARRAY_MAX_ELEMENTS),
      v.description(
        "BATCH only: run the command as a job array of this many elements (0..array-1, each told OPENAI4S_ARRAY_INDEX), at most the profile's limit.",
      ),
    ),
  ),
  maxConcurrent: v.optional(
    v.pipe(
      positiveInteger(ARRAY_MAX_ELEMENTS),
      v.description("With array: at most this many elements run at once."),
    ),
  ),
  tasks: v.optional(
    v.pipe(
      positiveInteger(LIMITS.tasksMax),
      v.description(
        "BATCH only: run the command as this many tasks (MPI ranks), at most the profile's maxTasks (default 1).",
      ),
    ),
  ),
  tasksPerNode: v.optional(
    v.pipe(
      positiveInteger(LIMITS.tasksMax),
      v.description("BATCH with tasks: at most this many tasks on one node."),
    ),
  ),
  hold: v.optional(
    v.pipe(
      v.boolean(),
      v.description(
        "Create it held (reason AWAITING_RELEASE): upload its input with PUT /v1/workloads/{id}/files/{path}, then POST /v1/workloads/{id}/release.",
      ),
    ),
  ),
  afterOk: v.optional(
    v.pipe(
      dependencyIds,
      v.description(
        "BATCH only: workload ids it runs after, each once it COMPLETED (a batch scheduler's afterok); one that ends otherwise ends this one CANCELLED, reason DEPENDENCY_NEVER_SATISFIED.",
      ),
    ),
  ),
  afterAny: v.optional(
    v.pipe(
      dependencyIds,
      v.description(
        "BATCH only: workload ids it runs after, each once it ended in any way (a batch scheduler's afterany).",
      ),
    ),
  ),
});
export type SubmitBody = v.InferOutput<typeof SubmitBody>;

export const ExecBody = v.strictObject({
  code: v.pipe(
    v.string(),
    v.maxLength(LIMITS.codeMaxLength),
    v.description("Python code to run in the session's kernel."),
  ),
  timeoutSeconds: v.optional(
    v.pipe(
      positiveInteger(LIMITS.timeLimitMaxSeconds),
      v.description(
        "The cell's own time limit: past it the cell is interrupted (its kernel restarted if that does not stop it) and answered ERROR with ename CellTimeout, its output kept. Absent: no limit of its own; the session's lifetime and the job's time limit still apply.",
      ),
    ),
  ),
  maxOutputChars: v.optional(
    v.pipe(
      positiveInteger(LIMITS.maxOutputCharsMax),
      v.description(
        "At most this many characters of each output stream (stdout, stderr) come back for this cell: its first and last halves, with a line between them naming the file in the workspace that holds the whole output. Lowers the profile's cap (its max_output_chars, default 200000) for this cell; a larger value is the profile's cap.",
      ),
    ),
  ),
});

export const TaskBody = v.strictObject({
  command: v.pipe(
    v.array(argument),
    v.minLength(1, "must not be empty"),
    v.maxLength(LIMITS.commandMaxArgs),
    v.description("argv of the step, run inside the live allocation without a shell."),
  ),
  timeoutSeconds: v.optional(
    v.pipe(
      positiveInteger(LIMITS.taskTimeoutMaxSeconds),
      v.description(`Kill the step after this long (default ${LIMITS.taskTimeoutDefaultSeconds}).`),
    ),
  ),
});

/**
 * A whole number in a query string, `min` to `max`. The number schema after the transform is
 * what the OpenAPI document shows (output type: `integer`, `minimum`, `maximum`), and its
 * actions are what the server enforces: one source, so the published bounds cannot drift
 * from the enforced ones (test/api/openapi-contract.test.ts probes both edges). The length
 * cap only keeps a megabyte of digits from reaching Number().
 */
const queryInteger = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,16}$/, "must be a decimal integer"),
    v.transform(Number),
    v.number(),
    v.integer(),
    v.minValue(min),
    v.maxValue(max),
  );

export const ListQuery = v.strictObject({
  kind: v.optional(v.pipe(v.picklist(WORKLOAD_KINDS), v.description("Only this kind."))),
  phase: v.optional(v.pipe(v.picklist(PHASES), v.description("Only this phase."))),
  backendJobId: v.optional(
    v.pipe(
      v.string(),
      v.regex(BACKEND_JOB_ID_PATTERN, "must be a backend job id (letters, digits, . _ -)"),
      v.description(
        "Only workloads one of whose attempts held this backend job id (allocations[].backendJobId).",
      ),
    ),
  ),
  limit: v.optional(
    v.pipe(
      queryInteger(1, LIMITS.listLimitMax),
      v.description(`Page size (default ${LIMITS.listLimitDefault}).`),
    ),
  ),
  cursor: v.optional(v.pipe(v.string(), v.description("nextCursor of the previous page."))),
  owner: v.optional(
    v.pipe(
      v.string(),
      v.maxLength(64),
      v.description(
        "Only this principal's workloads (the admin's filter; a principal sees only its own whatever it asks).",
      ),
    ),
  ),
});

const LOG_STREAMS = ["stdout", "stderr"] as const;

export const LogsQuery = v.strictObject({
  stream: v.optional(
    v.pipe(v.picklist(LOG_STREAMS), v.description("The job's stdout (default) or stderr.")),
  ),
  tail: v.optional(
    v.pipe(
      queryInteger(0, LIMITS.logTailMaxLines),
      v.description("Only the last N lines; 0 with follow: only what is written from now on."),
    ),
  ),
  follow: v.optional(
    v.pipe(
      v.picklist(["true", "false", "1", "0"]),
      v.description("Stream (chunked) while the attempt runs; the response ends when it ends."),
      v.transform((x) => x === "true" || x === "1"),
    ),
  ),
  attempt: v.optional(
    v.pipe(
      queryInteger(1, LIMITS.logAttemptMax),
      v.description("The attempt's number (1 is the first); default the latest."),
    ),
  ),
  index: v.optional(
    v.pipe(
      queryInteger(0, ARRAY_MAX_ELEMENTS - 1),
      v.description(
        "A job array's element (0..array-1): required for an array, refused otherwise.",
      ),
    ),
  ),
});

export const ExecQuery = v.strictObject({
  stream: v.optional(
    v.pipe(
      v.picklist(["1", "true", "0", "false"]),
      v.description("1 or true: server-sent events, as Accept: text/event-stream."),
    ),
  ),
});

export const CellEventsQuery = v.strictObject({
  after: v.optional(
    v.pipe(
      queryInteger(0, 999_999_999),
      v.description(
        "Only events after this event id (the `id:` of the last event seen); default 0, or the Last-Event-ID header.",
      ),
    ),
  ),
});

/** Largest page of a workspace listing (each entry is one lstat). */
export const FILES_LIST_MAX = 1000;

export const FilesListQuery = v.strictObject({
  prefix: v.optional(
    v.pipe(
      v.string(),
      v.maxLength(4095),
      v.description(
        "Only entries whose workspace path starts with this (`data/` lists that directory's tree).",
      ),
    ),
  ),
  cursor: v.optional(
    v.pipe(v.string(), v.maxLength(4095), v.description("The nextCursor of the previous page.")),
  ),
  limit: v.optional(
    v.pipe(
      queryInteger(1, FILES_LIST_MAX),
      v.description(`Entries per page (default and most ${FILES_LIST_MAX}).`),
    ),
  ),
});

export const UploadQuery = v.strictObject({
  mode: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^0?[0-7]{3,4}$/, "must be octal permission bits such as 0600 or 644"),
      v.description(
        "The file's permission bits in octal (default 0644); 0600 for a secret only the job may read. Setuid, setgid, sticky and world-writable modes are refused (400).",
      ),
    ),
  ),
});
