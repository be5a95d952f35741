/**
 * The SQLite adapter of admission's port (core/ports/admission-store.ts), committing
 * submissions in groups.
 *
 * Why groups: with synchronous=FULL each commit waits for its fsync, on the one thread that
 * also answers every request. A hundred POSTs sent at once were answered one commit after
 * another (issue 34's profile). Now the submissions that reach the store within one turn of
 * the event loop are written in one transaction (create-workloads.ts) and answered together
 * once it is on disk: still durable before any 201, with one fsync for all of them. While a
 * group commits (synchronously) the next requests gather, so the groups grow with the load.
 */
import type {
  AdmissionStore,
  CreateWorkloadInput,
  CreateWorkloadResult,
} from "../../../core/ports/admission-store.ts";
import { nextTurn } from "../../../lib/clock.ts";
import type { StoreDeps } from "../deps.ts";
import { createWorkloads } from "../ops/create-workloads.ts";
import { findWorkloadByIdempotencyKey } from "../ops/find-workload-by-idempotency-key.ts";
import { workloadOwners } from "../ops/workload-owners.ts";

interface Waiting {
  readonly input: CreateWorkloadInput;
  readonly resolve: (result: CreateWorkloadResult) => void;
  readonly reject: (error: unknown) => void;
}

export interface AdmissionStoreOptions {
  /** When the gathered submissions are written; default the event loop's next turn. */
  readonly flushAt?: () => Promise<void>;
}

export function bindAdmissionStore(
  deps: StoreDeps,
  options: AdmissionStoreOptions = {},
): AdmissionStore {
  const flushAt = options.flushAt ?? nextTurn;
  let waiting: Waiting[] = [];

  function flush(): void {
    const group = waiting;
    waiting = [];
    let answers: ReturnType<typeof createWorkloads>;
    try {
      answers = createWorkloads(
        deps,
        group.map((w) => w.input),
      );
    } catch (error) {
      for (const w of group) w.reject(error);
      return;
    }
    group.forEach((w, i) => {
      const answer = answers[i];
      if (answer === undefined) w.reject(new Error("the group commit lost a submission"));
      else if (answer.kind === "Done") w.resolve(answer.result);
      else w.reject(answer.error);
    });
  }

  return {
    findByIdempotencyKey: (owner, key) => findWorkloadByIdempotencyKey(deps, owner, key),
    ownersOf: (ids) => workloadOwners(deps, ids),
    create(input) {
      return new Promise<CreateWorkloadResult>((resolve, reject) => {
        if (waiting.length === 0) void flushAt().then(flush);
        waiting.push({ input, resolve, reject });
      });
    },
  };
}
