/**
 * The durable state: workloads (what was asked for), allocations (one row per attempt, one
 * executionEpoch each), events (every phase transition with reason and time), session
 * conditions, and burned credential nonces.
 *
 * Times are epoch milliseconds (integers) so ordering and arithmetic never depend on a
 * string format.
 */
import { sql } from "drizzle-orm";
import {
  index,
  integer,
  primaryKey,
  sqliteTable,
  text,
  uniqueIndex,
} from "drizzle-orm/sqlite-core";

export const workloads = sqliteTable(
  "workloads",
  {
    id: text("id").primaryKey(),
    kind: text("kind").notNull(),
    name: text("name").notNull(),
    profile: text("profile").notNull(),
    /** The durable spec operators read back. Never holds a credential or signature. */
    specJson: text("spec_json").notNull(),
    specRevision: integer("spec_revision").notNull().default(1),
    phase: text("phase").notNull(),
    reason: text("reason"),
    message: text("message"),
    /** The scheduler's own words `message` hides names of (core/scheduler-words.ts); NULL: same. */
    messageAdmin: text("message_admin"),
    /** RUN or STOP; STOP carries why (USER_CANCELLED, IDLE_TIMEOUT, MAX_LIFETIME, ...). */
    desired: text("desired").notNull().default("RUN"),
    stopReason: text("stop_reason"),
    stopMessage: text("stop_message"),
    executionEpoch: integer("execution_epoch").notNull().default(0),
    maxAttempts: integer("max_attempts").notNull().default(1),
    exitCode: integer("exit_code"),
    idempotencyKey: text("idempotency_key"),
    /** Hash of the request body that created this workload, to answer 409 on key reuse. */
    requestHash: text("request_hash"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    lastActiveAt: integer("last_active_at"),
    /** The principal that submitted it; NULL: the admin (and every workload before 0009). */
    owner: text("owner"),
    /** CPUs and GPUs its profile holds while it is live, summed for the owner's limits. */
    cpus: integer("cpus").notNull().default(0),
    gpus: integer("gpus").notNull().default(0),
    /** 1 from a submission with `hold` until its release: nothing is submitted meanwhile. */
    held: integer("held").notNull().default(0),
    /** The workloads it runs after, as JSON (core/dependencies.ts); NULL: none. */
    afterJson: text("after_json"),
  },
  (t) => [
    // Keys are each owner's own (0011): the admin's NULL owner folded to '' so its keys
    // stay unique among themselves (NULLs are distinct in a unique index).
    uniqueIndex("workloads_owner_idempotency_key").on(
      sql`coalesce(${t.owner}, '')`,
      t.idempotencyKey,
    ),
    index("workloads_phase").on(t.phase),
    index("workloads_created").on(t.createdAt, t.id),
    index("workloads_kind_created").on(t.kind, t.createdAt, t.id),
    index("workloads_phase_created").on(t.phase, t.createdAt, t.id),
    index("workloads_kind_phase_created").on(t.kind, t.phase, t.createdAt, t.id),
    index("workloads_profile_created").on(t.profile, t.createdAt, t.id),
    // A principal's own listing, newest first, and its live workloads summed at admission.
    index("workloads_owner_created").on(t.owner, t.createdAt, t.id),
    index("workloads_owner_live")
      .on(t.owner, t.kind)
      .where(
        sql`${t.phase} = 'PENDING' OR ${t.phase} = 'SUBMITTING' OR ${t.phase} = 'QUEUED' OR ${t.phase} = 'RUNNING' OR ${t.phase} = 'STOPPING'`,
      ),
    // The reconciler's every-tick read walks the live workloads oldest first. This partial
    // index holds exactly those, in that order, so the read is one in-order scan: with only
    // workloads_phase SQLite sorts all live rows in a temp b-tree on every tick (about half
    // of a 10,000-workload tick), and with workloads_created it would walk years of terminal
    // history. The list must be the non-terminal PHASES, written as in the reconciler's
    // statement (load-reconcile-snapshot.ts); test/store/live-index.test.ts proves both.
    // Written as a chain of = joined by OR, not as IN (...): SQLite evaluates an IN list of
    // three or more constants in an index predicate by building a temporary table, on every
    // execution of every UPDATE that sets phase (old row and new), which doubled the cost
    // of a reconciler tick's phase changes (migration 0006).
    index("workloads_live")
      .on(t.createdAt, t.id)
      .where(
        sql`${t.phase} = 'PENDING' OR ${t.phase} = 'SUBMITTING' OR ${t.phase} = 'QUEUED' OR ${t.phase} = 'RUNNING' OR ${t.phase} = 'STOPPING'`,
      ),
  ],
);

export const allocations = sqliteTable(
  "allocations",
  {
    id: text("id").primaryKey(),
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id),
    epoch: integer("epoch").notNull(),
    token: text("token").notNull(),
    handle: text("handle"),
    phase: text("phase").notNull(),
    reason: text("reason"),
    message: text("message"),
    exitCode: integer("exit_code"),
    submittedAt: integer("submitted_at"),
    startedAt: integer("started_at"),
    endedAt: integer("ended_at"),
    acknowledgedAt: integer("acknowledged_at"),
    createdAt: integer("created_at").notNull(),
    /**
     * 1 when the backend launched this allocation in its verified per-allocation sandbox, 0
     * when it did not, NULL when unknown (found by token after a lost answer, or older than
     * this column): while a live allocation is not 1, no SESSION is admitted or prepared,
     * because an unsandboxed job can read a session's workspace and credential.
     */
    launchSandboxed: integer("launch_sandboxed"),
    /**
     * Epoch ms at which the backend will end this allocation at the latest (its time limit,
     * from the scheduler's own end time once it started); NULL when unknown or unlimited.
     * What TIME_REMAINING and the near-the-limit warning are computed from.
     */
    deadlineAt: integer("deadline_at"),
    /** When the near-the-limit warning event was written: set once, so it is written once. */
    deadlineWarnedAt: integer("deadline_warned_at"),
    /**
     * A job array's size, copied from the workload's spec when the attempt is minted, so the
     * reconciler can tell the backend to read the allocation as an array without decoding
     * every spec each tick. NULL: one job.
     */
    arraySize: integer("array_size"),
    /**
     * A job array's elements as last observed: counts and indices by phase and the elements
     * that did not complete (core/array/array-view.ts), JSON. Rewritten only when they change.
     * NULL: one job, or an array not observed yet.
     */
    arrayViewJson: text("array_view_json"),
  },
  (t) => [
    uniqueIndex("allocations_token").on(t.token),
    uniqueIndex("allocations_workload_epoch").on(t.workloadId, t.epoch),
    // At most one active allocation per workload. The list is written literally (SQLite
    // refuses bound parameters in an index predicate) and must equal
    // ACTIVE_ALLOCATION_PHASES in models.ts: test/store/active-index.test.ts proves it.
    // A chain of = joined by OR rather than IN (...), for the reason given at workloads_live.
    uniqueIndex("allocations_one_active_per_workload")
      .on(t.workloadId)
      .where(
        sql`${t.phase} = 'SUBMITTING' OR ${t.phase} = 'QUEUED' OR ${t.phase} = 'RUNNING' OR ${t.phase} = 'STOPPING'`,
      ),
    index("allocations_phase").on(t.phase),
    // `GET /v1/workloads?backendJobId=`: an admin's lookup from a scheduler's job id
    // (migration 0007), one index probe instead of a scan of every attempt ever made.
    index("allocations_handle").on(t.handle),
  ],
);

export const events = sqliteTable(
  "events",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id),
    allocationId: text("allocation_id"),
    at: integer("at").notNull(),
    phase: text("phase").notNull(),
    reason: text("reason"),
    message: text("message"),
    /** As the workload's: the scheduler's own words, for the admin; NULL: `message`. */
    messageAdmin: text("message_admin"),
  },
  (t) => [index("events_workload").on(t.workloadId, t.id)],
);

export const conditions = sqliteTable(
  "conditions",
  {
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id),
    type: text("type").notNull(),
    status: text("status").notNull(),
    reason: text("reason").notNull(),
    message: text("message").notNull(),
    lastTransitionTime: integer("last_transition_time").notNull(),
  },
  (t) => [primaryKey({ columns: [t.workloadId, t.type] })],
);

/**
 * Credential nonces already presented to the worker gateway. Durable so that a daemon
 * restart does not reopen replay.
 */
export const burnedNonces = sqliteTable("burned_nonces", {
  nonce: text("nonce").primaryKey(),
  allocationId: text("allocation_id").notNull(),
  burnedAt: integer("burned_at").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

/**
 * A change counter for the reconciler's cached live view: every insert or update of a
 * workload or of one of its allocations appends the workload's id here, written by
 * triggers (migration 0002) in the same transaction, whichever connection or code path
 * wrote. The reconciler reloads only the workloads that appear after the last `seq` it
 * read, and deletes what it consumed.
 */
export const workloadChanges = sqliteTable("workload_changes", {
  seq: integer("seq").primaryKey({ autoIncrement: true }),
  workloadId: text("workload_id").notNull(),
});

/**
 * The last Verified isolation verdict per backend (migration 0007): what lets a restarted
 * daemon accept sessions at once instead of after a probe job that may wait in a busy queue
 * for as long as the queue is long. Used only by the same binary and within its time to
 * live (core/isolation/remembered-verdict.ts); an Unverified verdict deletes it.
 */
export const isolationVerdicts = sqliteTable("isolation_verdicts", {
  backend: text("backend").primaryKey(),
  mechanism: text("mechanism").notNull(),
  verifiedAt: integer("verified_at").notNull(),
  /** The daemon binary that saw it (version and executable identity). */
  binary: text("binary").notNull(),
  /** JSON array of the node names the probe ran on. */
  nodesJson: text("nodes_json").notNull(),
});

export const schema = {
  workloads,
  allocations,
  events,
  conditions,
  burnedNonces,
  workloadChanges,
  isolationVerdicts,
} as const;

/** API callers other than the admin (issue 22); a NULL limit is no limit. */
export const principals = sqliteTable(
  "principals",
  {
    name: text("name").primaryKey(),
    unixUser: text("unix_user"),
    maxSessions: integer("max_sessions"),
    maxBatch: integer("max_batch"),
    maxCpus: integer("max_cpus"),
    maxGpus: integer("max_gpus"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("principals_unix_user").on(t.unixUser)],
);

/** A principal's bearer tokens: only the secret's sha256 is kept, never the secret. */
export const principalTokens = sqliteTable(
  "principal_tokens",
  {
    id: text("id").primaryKey(),
    principal: text("principal")
      .notNull()
      .references(() => principals.name, { onDelete: "cascade" }),
    secretSha256: text("secret_sha256").notNull(),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at"),
    revokedAt: integer("revoked_at"),
  },
  (t) => [index("principal_tokens_principal").on(t.principal)],
);
