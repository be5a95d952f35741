/**
 * The tags as databases recorded them before the migrations were named for what they change:
 * written out here, not derived from `formerTags`, so dropping an alias fails this file.
 */
export const TAGS_BEFORE_THE_RENAME: readonly string[] = [
  "0000_init",
  "0001_live_workloads_index",
  "0002_containment",
  "0003_never_stalls_change_log",
  "0004_perf_view_cache_change_log",
  "0005_runway",
  "0006_perf2_index_predicates_without_in",
  "0007_isolation_verdict",
  "0008_job_arrays",
  "0009_principals",
  "0010_array_summary",
  "0011_idempotency_key_per_owner",
  "0012_filtered_list_indexes",
  "0013_dependencies_and_hold",
  "0014_message_admin",
];
