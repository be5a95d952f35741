/**
 * The response bodies as valibot schemas: the OpenAPI document is generated from them, and
 * the contract test parses real responses with them (strict objects: a field a view gains
 * without being described here fails that test). The `satisfies`-style checks at the end
 * make TypeScript refuse a view and its schema that disagree on a field.
 */
import * as v from "valibot";
import { CONDITION_TYPES, REASONS, WORKLOAD_KINDS } from "../../core/models.ts";
import { PROBLEMS, type ProblemSlug, problemReason } from "./problem.ts";
import type { ListedProfileView, PlacementView } from "./profiles/profile-view.ts";
import {
  d,
  integer,
  nullableInteger,
  nullableText,
  nullableTime,
  phase,
  reasonCode,
  text,
  time,
} from "./schema-fields.ts";
import type { AllocationView, ConditionView, EventView, WorkloadView } from "./views.ts";

/** The reason codes of phases, attempts and events, documented once. */
export const ReasonSchema = v.pipe(
  v.picklist(REASONS),
  d("Why a workload, attempt or condition is where it is."),
);

const ConditionSchema = v.strictObject({
  type: v.pipe(
    v.picklist([...CONDITION_TYPES, "SCHEDULED"]),
    d("Which condition: SCHEDULED (every kind), or a session's readiness condition."),
  ),
  status: v.pipe(v.picklist(["TRUE", "FALSE", "UNKNOWN"]), d("Its current value.")),
  reason: text("Why it has that value (UPPER_SNAKE)."),
  message: text("The same for people."),
  lastTransitionTime: time("When the status last changed."),
});

const elementCounts = (what: string) =>
  v.pipe(v.record(v.string(), v.pipe(v.number(), v.integer())), d(what));

const ArrayElementSchema = v.strictObject({
  index: integer("The element's index (OPENAI4S_ARRAY_INDEX), from 0."),
  phase,
  reason: reasonCode("Why the element is where it is."),
  exitCode: nullableInteger("Its exit status once it ended, when the backend knows it."),
});

const ArraySchema = v.strictObject({
  size: integer("How many elements the array has (0..size-1)."),
  maxConcurrent: nullableInteger("The most elements running at once, as asked; null: no cap."),
  counts: elementCounts(
    "Elements per phase (COMPLETED, FAILED, LOST, CANCELLED, RUNNING, STOPPING, QUEUED, or UNKNOWN for one the backend did not report); phases with none are left out.",
  ),
  indices: v.pipe(
    v.record(v.string(), v.string()),
    d('The indices in each phase as ranges, e.g. {"COMPLETED": "0-16,18-999", "FAILED": "17"}.'),
  ),
  elements: v.pipe(
    v.array(ArrayElementSchema),
    d(
      "The elements that did not (or not yet) complete, lowest index first, at most 100: a failed one's reason and exit code.",
    ),
  ),
  elementsOmitted: integer("How many such elements `elements` leaves out."),
});

const AllocationSchema = v.strictObject({
  id: text("The attempt's id."),
  epoch: integer("The attempt's number, 1 for the first; `logs --attempt N` takes it."),
  phase,
  reason: reasonCode("Why the attempt is where it is."),
  submittedAt: nullableTime("When the backend accepted the attempt."),
  startedAt: nullableTime("When the attempt started running."),
  endedAt: nullableTime("When the attempt ended."),
  deadline: nullableTime(
    "When the backend ends the attempt for its time limit, as the backend itself computed it once the attempt started; null when not known or without a limit.",
  ),
  backendJobId: nullableText(
    "The backend's own id for this attempt (a scheduler's job id), to match it in the backend's tools; `GET /v1/workloads?backendJobId=` finds the workload from it. Null before the attempt was handed to the backend.",
  ),
  array: v.pipe(
    v.nullable(ArraySchema),
    d(
      "A job array's elements as last observed: counts and indices by phase and each element that did not complete, with its reason and exit code. Null for one job, or before the backend was first asked.",
    ),
  ),
});

export const WorkloadSchema = v.strictObject({
  id: text("The workload's id."),
  kind: v.pipe(v.picklist(WORKLOAD_KINDS), d("SESSION (interactive kernel) or BATCH.")),
  name: text("The name given at submission, or one derived from the id."),
  profile: text("The profile it runs on."),
  environment: nullableText("A SESSION's environment on its profile; null: the node's python3."),
  resources: v.pipe(
    v.strictObject({
      cpus: nullableInteger("CPUs per node it asked for; null: the profile's `cpus`."),
      memoryMb: nullableInteger("Memory per node in MB it asked for; null: the profile's."),
      gpus: nullableInteger("GPUs per node it asked for; null: the profile's `gpus`."),
    }),
    d("What it asked for in place of its profile's defaults (`resources` at submission)."),
  ),
  owner: nullableText("The principal that submitted it; null: the admin."),
  held: v.pipe(
    v.boolean(),
    d(
      "Created held (`hold`) and not released yet: nothing runs until POST /v1/workloads/{id}/release.",
    ),
  ),
  after: v.pipe(
    v.array(
      v.strictObject({
        kind: v.pipe(
          v.picklist(["afterok", "afterany"]),
          d("afterok: once it COMPLETED; afterany: once it ended."),
        ),
        workloadId: text("The workload it runs after."),
      }),
    ),
    d("The workloads it runs after (afterOk, afterAny at submission)."),
  ),
  phase,
  reason: reasonCode("Why it is in this phase (terminal phases always have one)."),
  message: nullableText("The same for people."),
  hint: nullableText("What the reason asks a person to do; null when it asks nothing."),
  specRevision: integer("Revision of the stored request."),
  executionEpoch: integer("The number of the current (latest) attempt; 0 before the first."),
  createdAt: time("When it was accepted."),
  updatedAt: time("When it last changed."),
  lastActiveAt: nullableTime("A session's last user activity (exec, step)."),
  exitCode: nullableInteger("The job's exit status once it ended, when the backend knows it."),
  conditions: v.pipe(
    v.array(ConditionSchema),
    d(
      "SCHEDULED first (FALSE with the waiting reason until the attempt has its resources); for SESSION then the four readiness conditions and READY, in order.",
    ),
  ),
  allocations: v.pipe(v.array(AllocationSchema), d("One per attempt, oldest first.")),
  deadline: nullableTime(
    "TIME_REMAINING: when the current attempt is ended for its time limit, while it runs; null when it does not run, or has no limit, or the backend has not said yet.",
  ),
  phaseConfirmedAt: nullableTime(
    "When `phase` was last confirmed. For a phase the backend holds (SUBMITTING, QUEUED, RUNNING, STOPPING): the last time the backend answered for the current attempt, null when it has not since the daemon started (a phase read from before a restart, not seen since). For PENDING and ended phases, which the daemon decides: when the phase was written.",
  ),
  timeRemainingSeconds: nullableInteger(
    "TIME_REMAINING: whole seconds left before `deadline` when this answer was made, never negative; null when `deadline` is null. A session's kernel has the same deadline as OPENAI4S_DEADLINE and `time_remaining()`.",
  ),
});

export const WorkloadListSchema = v.strictObject({
  items: v.pipe(v.array(WorkloadSchema), d("Newest first.")),
  nextCursor: nullableText("Pass as `cursor` for the next page; null on the last page."),
});

const EventSchema = v.strictObject({
  at: time("When the transition happened."),
  phase,
  reason: reasonCode("Why."),
  message: nullableText("The same for people."),
});

export const EventListSchema = v.pipe(v.array(EventSchema), d("Transitions, oldest first."));

const PlacementSchema = v.strictObject({
  placeable: v.pipe(v.boolean(), d("Whether a workload of this kind would be placed now.")),
  reason: nullableText("Why not (UPPER_SNAKE, e.g. ISOLATION_UNAVAILABLE); null when placeable."),
  message: nullableText("Why not, for people; null when placeable."),
});

export const DegradedSchema = v.strictObject({
  reason: v.pipe(
    v.picklist(["SCHEDULER_REFUSES", "SUBMISSIONS_REFUSED"]),
    d(
      "SCHEDULER_REFUSES: the scheduler's dry run of the profile (at start and every 10 minutes) refuses any job of it, e.g. a queue the cluster does not have; SUBMISSIONS_REFUSED: the backend refused its last submissions (its breaker is open).",
    ),
  ),
  message: text(
    "The scheduler's (or backend's) own words: as said to the admin; a principal reads them with the site's queue, policy and account names hidden.",
  ),
  consecutiveRejections: integer("Submissions it refused in a row."),
  since: time("When the profile became degraded."),
  retryAt: nullableTime(
    "When one submission is tried again (a back-off that doubles with each refusal); null while its breaker is closed.",
  ),
});

const ProfileSchema = v.strictObject({
  name: text("What scientists call it; `profile` in a submission."),
  description: text("What it is for."),
  kinds: v.pipe(v.array(v.picklist(WORKLOAD_KINDS)), d("The kinds it accepts.")),
  resources: v.pipe(
    v.strictObject({
      nodes: integer("Nodes per attempt."),
      cpus: integer("CPUs per node a workload gets when it asks for none (`resources.cpus`)."),
      gpus: integer("GPUs per node a workload gets when it asks for none (`resources.gpus`)."),
      memoryMb: nullableInteger(
        "Memory per node in MB a workload gets when it asks for none (`resources.memoryMb`); null when not limited.",
      ),
      timeLimitSeconds: nullableInteger(
        "The time limit a workload gets when it asks for none; null when none.",
      ),
      maxCpus: integer("Most CPUs per node a workload may ask for (`cpus` unless raised)."),
      maxMemoryMb: nullableInteger(
        "Most memory per node in MB a workload may ask for (`memoryMb` unless raised); null: not bounded by the profile.",
      ),
      maxGpus: integer("Most GPUs per node a workload may ask for (`gpus` unless raised)."),
      maxTimeLimitSeconds: nullableInteger(
        "Longest time limit a workload may ask for (`timeLimitSeconds` unless raised); null when none.",
      ),
      maxTasks: integer(
        "Most tasks (MPI ranks) one BATCH workload may ask for; 1: a single command.",
      ),
      maxArraySize: integer(
        "Most elements one BATCH job array may have (a cluster's own limit, or a local profile's max_array_size); 0: it runs no arrays.",
      ),
    }),
    d("What an attempt on this profile is granted by default, and the most a workload may ask."),
  ),
  network: v.pipe(
    v.picklist(["host", "none"]),
    d(
      "What its jobs' network is: `host`, the machine's (on a cluster, the node's), loopback services included; `none`, a namespace of their own with loopback only.",
    ),
  ),
  runAs: v.pipe(
    v.picklist(["allocation", "owner"]),
    d(
      "Who its jobs run as: `owner`, the submitting principal's own unix account (its files are yours, the cluster's accounting charges you); `allocation`, a service identity per workload.",
    ),
  ),
  mounts: v.pipe(
    v.array(
      v.strictObject({
        target: text("Where the job sees the directory."),
        mode: v.pipe(v.picklist(["ro", "rw"]), d("`ro`: read-only; `rw`: writable.")),
      }),
    ),
    d(
      "Directories the admin binds into every job of this profile (your data in, results out); where they come from on the host is not shown.",
    ),
  ),
  environments: v.pipe(
    v.array(
      v.strictObject({
        name: text("What a SESSION names as `environment` (its kernelspec: PROFILE/NAME)."),
        displayName: text("What a notebook's kernel picker shows."),
      }),
    ),
    d(
      "Software environments a SESSION may pick (a venv, conda env or modules); empty: the node's python3.",
    ),
  ),
  placement: v.pipe(
    v.strictObject({
      SESSION: v.optional(v.pipe(PlacementSchema, d("Present when the profile accepts SESSION."))),
      BATCH: v.optional(v.pipe(PlacementSchema, d("Present when the profile accepts BATCH."))),
    }),
    d("Per accepted kind: whether it can be placed now, and if not why."),
  ),
  degraded: v.pipe(
    v.nullable(DegradedSchema),
    d(
      "Set while the scheduler refuses this profile's dry run (its submissions will be rejected), or the backend keeps refusing it: then its workloads wait PENDING (PROFILE_DEGRADED) and one submission is tried again after a back-off; null when it is not degraded.",
    ),
  ),
});

export const ProfileListSchema = v.strictObject({
  profiles: v.pipe(v.array(ProfileSchema), d("Every profile the backend offers.")),
});

const mimeBundle = (what: string) =>
  v.pipe(
    v.record(v.string(), v.string()),
    d(
      `${what} A MIME bundle: text/plain always; image/png (base64), text/html, application/json when the object provides them.`,
    ),
  );

/** One output of a cell, in Jupyter's message shapes (docs/sessions.md has the mapping). */
export const ExecOutputSchema = v.pipe(
  v.variant("type", [
    v.strictObject({
      type: v.pipe(v.literal("stream"), d("Text the cell printed (Jupyter `stream`).")),
      name: v.pipe(v.picklist(["stdout", "stderr"]), d("Which stream.")),
      text: text("The text."),
    }),
    v.strictObject({
      type: v.pipe(v.literal("display_data"), d("A display() call (Jupyter `display_data`).")),
      data: mimeBundle("What was displayed."),
    }),
    v.strictObject({
      type: v.pipe(v.literal("execute_result"), d("The last expression's value.")),
      data: mimeBundle("The value."),
    }),
    v.strictObject({
      type: v.pipe(v.literal("error"), d("The cell raised (Jupyter `error`).")),
      ename: text("The exception's class name."),
      evalue: text("Its message."),
      traceback: text("The formatted traceback."),
    }),
  ]),
  d("One output of the cell, in the order produced."),
);

export const ExecResultSchema = v.strictObject({
  status: v.pipe(v.picklist(["OK", "ERROR"]), d("ERROR: the code raised; not a daemon failure.")),
  output: text("What the code printed, and the value of its last expression (text/plain)."),
  error: nullableText("The traceback when status is ERROR."),
  outputs: v.pipe(v.array(ExecOutputSchema), d("Every output with its MIME bundle, in order.")),
  kernelRestarted: v.pipe(
    v.boolean(),
    d("The kernel had died and was restarted for this cell: earlier variables are gone."),
  ),
  cell: text("The cell's id: GET /v1/workloads/{id}/cells/{cell}/events reads its events again."),
});

export const InterruptResultSchema = v.strictObject({
  interrupted: v.pipe(
    v.boolean(),
    d("False when no cell was running: there was nothing to interrupt."),
  ),
});

export const RestartResultSchema = v.strictObject({
  running: v.pipe(v.boolean(), d("A fresh kernel runs (false: it could not be started).")),
  message: text("The kernel's state, or why it could not be started."),
});

export const TaskResultSchema = v.strictObject({
  exitCode: integer("The step's exit status."),
  stdout: text("Its standard output (capped)."),
  stderr: text("Its standard error (capped)."),
});

const PROBLEM_REASONS = Object.keys(PROBLEMS).map((slug) => problemReason(slug as ProblemSlug));

export const ProblemSchema = v.looseObject({
  type: text("A URN naming the kind of problem (urn:openai4s:problem:SLUG)."),
  reason: v.pipe(
    v.picklist(PROBLEM_REASONS as [string, ...string[]]),
    d(
      `Stable UPPER_SNAKE code a script can switch on: ${Object.entries(PROBLEMS)
        .map(([slug, meaning]) => `${problemReason(slug as ProblemSlug)}: ${meaning}`)
        .join(" ")}`,
    ),
  ),
  title: text("Short, the same for every problem of this type."),
  status: integer("The HTTP status."),
  detail: text("What went wrong with this request."),
  errors: v.pipe(
    v.array(
      v.strictObject({
        path: text(
          "The field, parameter or header (`command[0]`, `env.PATH`); empty for the body.",
        ),
        message: text("What is wrong with it."),
      }),
    ),
    d("One entry per invalid input; empty for other problems."),
  ),
});

// Compile-time agreement of views and schemas on their fields: a field added to a view and
// not described here (or the reverse) is a type error on these lines. Nested objects are
// held to the schemas at run time by the contract test's strict parse of real responses.
type Out<S extends v.GenericSchema> = v.InferOutput<S>;
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never]
  ? true
  : { readonly missing: Exclude<keyof A, keyof B>; readonly extra: Exclude<keyof B, keyof A> };
export const VIEWS_AGREE: readonly true[] = [
  true satisfies SameKeys<WorkloadView, Out<typeof WorkloadSchema>>,
  true satisfies SameKeys<AllocationView, Out<typeof AllocationSchema>>,
  true satisfies SameKeys<ConditionView, Out<typeof ConditionSchema>>,
  true satisfies SameKeys<EventView, Out<typeof EventSchema>>,
  true satisfies SameKeys<ListedProfileView, Out<typeof ProfileSchema>>,
  true satisfies SameKeys<PlacementView, Out<typeof PlacementSchema>>,
];
