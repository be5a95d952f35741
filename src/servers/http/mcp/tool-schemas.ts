/**
 * The MCP tools' arguments, as valibot schemas built from the HTTP API's own (SubmitBody,
 * ExecBody, LogsQuery): where the two doors take the same field it has one definition, so
 * a limit cannot differ between them. The JSON Schema a client sees is derived from these.
 */
import * as v from "valibot";
import {
  ExecBody,
  FILES_LIST_MAX,
  IDEMPOTENCY_KEY_PATTERN,
  LIMITS,
  SubmitBody,
} from "../workloads/schemas.ts";

const WORKLOAD_ID = v.pipe(
  v.string(),
  v.minLength(1),
  v.maxLength(200),
  v.description("A workload id (wl_...) this principal submitted."),
);
const SESSION_ID = v.pipe(
  v.string(),
  v.minLength(1),
  v.maxLength(200),
  v.description("A session's workload id, from start_session."),
);
const submit = SubmitBody.entries;
const IDEMPOTENCY_KEY = v.pipe(
  v.string(),
  v.regex(IDEMPOTENCY_KEY_PATTERN, "must be 1 to 200 printable ASCII characters without spaces"),
  v.description(
    "A key you choose for this submission. Calling again with the same key and arguments (after a lost answer) returns the same workload, never a second job.",
  ),
);
/** A workspace path as the files API takes it (checked again, component by component). */
const WORKSPACE_PATH = v.pipe(
  v.string(),
  v.minLength(1),
  v.maxLength(4095),
  v.description("A path inside the workload's workspace, relative (data/in.csv)."),
);

/** How long start_session waits for READY at most (it returns the id either way). */
export const START_WAIT_MAX_SECONDS = 3600;
export const START_WAIT_DEFAULT_SECONDS = 600;

export const NoArguments = v.strictObject({});

export const StartSessionArgs = v.strictObject({
  profile: submit.profile,
  environment: v.optional(
    v.pipe(
      v.string(),
      v.minLength(1),
      v.maxLength(200),
      v.description(
        "A software environment the profile offers (list_profiles); checked by the daemon at admission.",
      ),
    ),
  ),
  name: submit.name,
  timeLimitSeconds: submit.timeLimitSeconds,
  resources: submit.resources,
  idleTimeoutSeconds: submit.idleTimeoutSeconds,
  wait: v.optional(
    v.pipe(
      v.boolean(),
      v.description(
        "Wait until the session is READY (default true); false returns the id at once.",
      ),
    ),
  ),
  waitSeconds: v.optional(
    v.pipe(
      v.number(),
      v.integer("must be an integer"),
      v.minValue(1),
      v.maxValue(START_WAIT_MAX_SECONDS),
      v.description(
        `How long to wait for READY (default ${START_WAIT_DEFAULT_SECONDS}); the session keeps starting after.`,
      ),
    ),
  ),
  idempotency_key: v.optional(IDEMPOTENCY_KEY),
});

export const SessionArgs = v.strictObject({ session: SESSION_ID });

export const RunCodeArgs = v.strictObject({
  session: SESSION_ID,
  code: ExecBody.entries.code,
  timeoutSeconds: ExecBody.entries.timeoutSeconds,
  maxOutputChars: ExecBody.entries.maxOutputChars,
});

export const WriteFileArgs = v.strictObject({
  workload: WORKLOAD_ID,
  path: WORKSPACE_PATH,
  content: v.pipe(
    v.string(),
    v.description("The file's content: text, or base64 with encoding base64."),
  ),
  encoding: v.optional(
    v.pipe(
      v.picklist(["utf8", "base64"]),
      v.description("utf8 (default) or base64 for binary content."),
    ),
  ),
  mode: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^0?[0-7]{3}$/, "must be octal permission bits such as 0600 or 644"),
      v.description("Permission bits in octal (default 0644)."),
    ),
  ),
});

export const ReadFileArgs = v.strictObject({
  workload: WORKLOAD_ID,
  path: WORKSPACE_PATH,
});

export const ListFilesArgs = v.strictObject({
  workload: WORKLOAD_ID,
  prefix: v.optional(
    v.pipe(
      v.string(),
      v.maxLength(4095),
      v.description(
        "Only entries whose path starts with this (data/ lists that directory's tree).",
      ),
    ),
  ),
  cursor: v.optional(
    v.pipe(v.string(), v.maxLength(4095), v.description("nextCursor of the previous answer.")),
  ),
  limit: v.optional(
    v.pipe(
      v.number(),
      v.integer("must be an integer"),
      v.minValue(1),
      v.maxValue(FILES_LIST_MAX),
      v.description(`Entries per page (default ${FILES_LIST_MAX}).`),
    ),
  ),
});

export const SubmitBatchArgs = v.strictObject({
  command: v.pipe(
    v.array(v.pipe(v.string(), v.maxLength(LIMITS.argMaxLength))),
    v.minLength(1, "must not be empty"),
    v.maxLength(LIMITS.commandMaxArgs),
    v.description(
      'argv, run without a shell: ["python3", "fit.py"]. For a shell line: ["bash", "-c", "..."].',
    ),
  ),
  profile: submit.profile,
  idempotency_key: IDEMPOTENCY_KEY,
  environment: StartSessionArgs.entries.environment,
  name: submit.name,
  env: submit.env,
  timeLimitSeconds: submit.timeLimitSeconds,
  resources: submit.resources,
  maxAttempts: submit.maxAttempts,
  array: submit.array,
  maxConcurrent: submit.maxConcurrent,
  tasks: submit.tasks,
  tasksPerNode: submit.tasksPerNode,
});

export const WorkloadArgs = v.strictObject({ workload: WORKLOAD_ID });

export const JobLogsArgs = v.strictObject({
  workload: WORKLOAD_ID,
  stream: v.optional(
    v.pipe(v.picklist(["stdout", "stderr"]), v.description("stdout (default) or stderr.")),
  ),
  tail: v.optional(
    v.pipe(
      v.number(),
      v.integer("must be an integer"),
      v.minValue(1),
      v.maxValue(LIMITS.logTailMaxLines),
      v.description(
        "Only the last N lines (default: the whole log, up to the size cap: then its end).",
      ),
    ),
  ),
  index: v.optional(
    v.pipe(
      v.number(),
      v.integer("must be an integer"),
      v.minValue(0),
      v.description("A job array's element (0..array-1): required for an array."),
    ),
  ),
  attempt: v.optional(
    v.pipe(
      v.number(),
      v.integer("must be an integer"),
      v.minValue(1),
      v.maxValue(LIMITS.logAttemptMax),
      v.description("The attempt (1 is the first); default the latest."),
    ),
  ),
});
