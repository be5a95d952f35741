/**
 * What the scheduler says travels into workload messages, events and diagnostics, which the
 * API returns to anyone who may read a workload. Scheduler text names partitions and QoS
 * ("Invalid partition name specified", pending reason "QOSMaxJobsPerUserLimit") and echoes
 * the values an administrator configured: the same leak `ClusterProfile.public()` closes, by
 * a slower route. Every message that leaves this backend is therefore rewritten here; the
 * daemon's log keeps the scheduler's own words for the administrator, and so does a refused
 * submission's workload (`messageAdmin`, shown to the admin only).
 */
import { decorateBackend } from "../../core/decorate-backend.ts";
import type {
  AllocationObservation,
  CancelResult,
  FindResult,
  SubmitResult,
  TaskResult,
} from "../../core/ports/allocation-backend.ts";
import { messageForms } from "../../core/scheduler-words.ts";
import type { PlacementCatalog, SlurmBackend } from "./backend.ts";

export interface HiddenNames {
  /** Partition, QoS and account values from cluster.toml. */
  readonly values: readonly string[];
}

const HIDDEN = "[hidden]";

/** Every partition, QoS and account value the catalog maps profiles onto. */
export function hiddenNamesOf(catalog: PlacementCatalog): HiddenNames {
  const values: string[] = [];
  for (const profile of catalog.profiles()) {
    const placement = catalog.placement(profile.name);
    if (placement === null) continue;
    for (const v of [placement.partition, placement.qos, placement.account]) {
      if (v !== null) values.push(v);
    }
  }
  return { values };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Builds the rewrite: configured names first (longest first), then the vocabulary. */
export function publicMessageRewriter(hidden: HiddenNames): (message: string) => string {
  const values = [...new Set(hidden.values.filter((v) => v.length > 0))].sort(
    (a, b) => b.length - a.length,
  );
  // A configured name is hidden where it stands as a token of its own (not inside a longer
  // identifier), so a partition called "gpu" does not mangle the word "gpus".
  const valuePattern =
    values.length === 0
      ? null
      : new RegExp(
          `(?<![A-Za-z0-9_.-])(?:${values.map(escapeRegExp).join("|")})(?![A-Za-z0-9_-])`,
          "g",
        );
  return (message) => {
    let out = valuePattern === null ? message : message.replace(valuePattern, HIDDEN);
    out = out.replace(/partitions?/gi, (m) => (m.endsWith("s") ? "placements" : "placement"));
    out = out.replace(/qos/gi, "policy");
    return out;
  };
}

function observation(o: AllocationObservation, rewrite: (m: string) => string) {
  switch (o.kind) {
    case "Observed":
      return { ...o, message: o.message === null ? null : rewrite(o.message) };
    case "Indeterminate":
      return { ...o, message: rewrite(o.message) };
    default: {
      const never: never = o;
      throw new Error(`unhandled observation ${JSON.stringify(never)}`);
    }
  }
}

function submitResult(r: SubmitResult, rewrite: (m: string) => string): SubmitResult {
  switch (r.kind) {
    case "Created":
    case "Existing":
      return r;
    case "Rejected": {
      // Both forms: the workload keeps the scheduler's words for the admin (a partition the
      // cluster lacks, named), the hidden form for its principal (core/scheduler-words.ts).
      const forms = messageForms(r.message, rewrite);
      return {
        ...r,
        message: forms.message,
        ...(forms.messageAdmin === null ? {} : { messageAdmin: forms.messageAdmin }),
      };
    }
    case "Unknown":
      return { ...r, message: rewrite(r.message) };
    default: {
      const never: never = r;
      throw new Error(`unhandled submit result ${JSON.stringify(never)}`);
    }
  }
}

function findResult(r: FindResult, rewrite: (m: string) => string): FindResult {
  switch (r.kind) {
    case "Found":
      return { ...r, observation: observation(r.observation, rewrite) };
    case "Absent":
      return r;
    case "Unavailable":
      return { ...r, message: rewrite(r.message) };
    default: {
      const never: never = r;
      throw new Error(`unhandled find result ${JSON.stringify(never)}`);
    }
  }
}

function cancelResult(r: CancelResult, rewrite: (m: string) => string): CancelResult {
  return r.kind === "Unavailable" ? { ...r, message: rewrite(r.message) } : r;
}

function taskResult(r: TaskResult, rewrite: (m: string) => string): TaskResult {
  switch (r.kind) {
    case "Completed":
      return r;
    case "Refused":
    case "Unavailable":
      return { ...r, message: rewrite(r.message) };
    default: {
      const never: never = r;
      throw new Error(`unhandled task result ${JSON.stringify(never)}`);
    }
  }
}

function mapValues<K, V>(map: ReadonlyMap<K, V>, f: (v: V) => V): ReadonlyMap<K, V> {
  const out = new Map<K, V>();
  for (const [k, v] of map) out.set(k, f(v));
  return out;
}

/** The same backend, with every message it returns rewritten for the public. */
export function withPublicMessages(backend: SlurmBackend, hidden: HiddenNames): SlurmBackend {
  const rewrite = publicMessageRewriter(hidden);
  const { changes, tasks } = backend.capabilities;
  return decorateBackend(
    backend,
    {
      async submit(requests) {
        return mapValues(await backend.submit(requests), (r) => submitResult(r, rewrite));
      },
      async observe(targets) {
        const result = await backend.observe(targets);
        if (result.kind === "Unavailable") return { ...result, message: rewrite(result.message) };
        return {
          kind: "Observed",
          observations: mapValues(result.observations, (o) => observation(o, rewrite)),
        };
      },
      async cancel(targets) {
        return mapValues(await backend.cancel(targets), (r) => cancelResult(r, rewrite));
      },
      async findByToken(tokens) {
        return mapValues(await backend.findByToken(tokens), (r) => findResult(r, rewrite));
      },
      async diagnostics() {
        const d = await backend.diagnostics();
        return { ...d, message: rewrite(d.message) };
      },
    },
    {
      changes: {
        async observeChanges(cursor, targets) {
          const result = await changes.observeChanges(cursor, targets);
          switch (result.kind) {
            case "Unavailable":
              return { ...result, message: rewrite(result.message) };
            case "CursorExpired":
              return result;
            case "Observed":
              return {
                ...result,
                observations: mapValues(result.observations, (o) => observation(o, rewrite)),
                changes: result.changes.map((c) => ({
                  target: c.target,
                  observation: observation(c.observation, rewrite),
                })),
              };
            default: {
              const never: never = result;
              throw new Error(`unhandled observe result ${JSON.stringify(never)}`);
            }
          }
        },
      },
      tasks: {
        async runTask(target, command, options) {
          return taskResult(await tasks.runTask(target, command, options), rewrite);
        },
      },
    },
  );
}
