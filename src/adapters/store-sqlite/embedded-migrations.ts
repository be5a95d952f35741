/**
 * Migrations embedded into the program text, so the compiled binary migrates a database
 * without reading a folder on disk (drizzle's folder migrator cannot see one from inside a
 * single executable). drizzle-kit generates the .sql files and the journal; add each new
 * file to EMBEDDED below. test/store/migrations.test.ts fails when the list and the journal
 * disagree.
 *
 * Migrations are named for what they change. Five once carried the name of the branch that
 * wrote them; a database records applied migrations by tag (`openai4s_migrations`), so each
 * renamed one lists its `formerTags`: a database that applied it under the old name neither
 * runs it again (its CREATEs would fail and the daemon would not start) nor skips it.
 */

import m0000 from "./migrations/0000_init.sql" with { type: "text" };
import m0001 from "./migrations/0001_live_workloads_index.sql" with { type: "text" };
import m0002 from "./migrations/0002_launch_sandboxed.sql" with { type: "text" };
import m0003 from "./migrations/0003_change_log.sql" with { type: "text" };
import m0004 from "./migrations/0004_change_log_conditions_and_deletes.sql" with { type: "text" };
import m0005 from "./migrations/0005_allocation_deadlines.sql" with { type: "text" };
import m0006 from "./migrations/0006_phase_indexes_without_in.sql" with { type: "text" };
import m0007 from "./migrations/0007_isolation_verdict.sql" with { type: "text" };
import m0008 from "./migrations/0008_job_arrays.sql" with { type: "text" };
import m0009 from "./migrations/0009_principals.sql" with { type: "text" };
import m0010 from "./migrations/0010_array_summary.sql" with { type: "text" };
import m0011 from "./migrations/0011_idempotency_key_per_owner.sql" with { type: "text" };
import m0012 from "./migrations/0012_filtered_list_indexes.sql" with { type: "text" };
import m0013 from "./migrations/0013_dependencies_and_hold.sql" with { type: "text" };
import m0014 from "./migrations/0014_message_admin.sql" with { type: "text" };
import journal from "./migrations/meta/_journal.json" with { type: "json" };

export interface EmbeddedMigration {
  readonly tag: string;
  readonly sql: string;
  /** Names this migration was applied under before it was renamed: applied all the same. */
  readonly formerTags?: readonly string[];
}

export const EMBEDDED_MIGRATIONS: readonly EmbeddedMigration[] = [
  { tag: "0000_init", sql: m0000 },
  { tag: "0001_live_workloads_index", sql: m0001 },
  { tag: "0002_launch_sandboxed", sql: m0002, formerTags: ["0002_containment"] },
  { tag: "0003_change_log", sql: m0003, formerTags: ["0003_never_stalls_change_log"] },
  {
    tag: "0004_change_log_conditions_and_deletes",
    sql: m0004,
    formerTags: ["0004_perf_view_cache_change_log"],
  },
  { tag: "0005_allocation_deadlines", sql: m0005, formerTags: ["0005_runway"] },
  {
    tag: "0006_phase_indexes_without_in",
    sql: m0006,
    formerTags: ["0006_perf2_index_predicates_without_in"],
  },
  { tag: "0007_isolation_verdict", sql: m0007 },
  { tag: "0008_job_arrays", sql: m0008 },
  { tag: "0009_principals", sql: m0009 },
  { tag: "0010_array_summary", sql: m0010 },
  { tag: "0011_idempotency_key_per_owner", sql: m0011 },
  // A list filtered by kind, phase or profile (the API's, /ui's) reads its page, not the
  // store: each filter with the list's order, (created_at, id) (issue 34).
  { tag: "0012_filtered_list_indexes", sql: m0012 },
  // Workloads held until released, and the workloads one runs after (issue 35).
  { tag: "0013_dependencies_and_hold", sql: m0013 },
  // The scheduler's own words kept for the admin beside the hidden form (issue 35).
  { tag: "0014_message_admin", sql: m0014 },
];

export const JOURNAL_TAGS: readonly string[] = journal.entries.map((e) => e.tag);
