/**
 * Which workloads that want to run and hold nothing may be minted now: not one created held
 * (until its release), not one whose dependencies are unmet (core/dependencies.ts). Level-
 * triggered: such a workload is looked at every tick (it is never settled, focus.ts), so a
 * parent that ended since is seen on the next one. Writes why it waits once (DEPENDENCY, with
 * the parents it waits for), and ends it CANCELLED, DEPENDENCY_NEVER_SATISFIED, naming the
 * parent, when one ended so that it never can run: what batch schedulers call the same thing, and
 * what an admin expects of a job nobody will ever start.
 */
import { dependencyVerdict } from "../dependencies.ts";
import type { Workload } from "../models.ts";
import type { Transition } from "../ports/reconciler-store.ts";
import { type TickEnv, write } from "./env.ts";

export function gateMint(env: TickEnv, mint: readonly Workload[]): Workload[] {
  const ready: Workload[] = [];
  const dependent: Workload[] = [];
  for (const w of mint) {
    if (w.held === true) continue;
    if (w.after === undefined || w.after.length === 0) ready.push(w);
    else dependent.push(w);
  }
  if (dependent.length === 0) return ready;
  const parents = env.store.parentStates(
    dependent.flatMap((w) => (w.after ?? []).map((d) => d.workloadId)),
  );
  const transitions: Transition[] = [];
  for (const w of dependent) {
    const verdict = dependencyVerdict(w.after ?? [], parents);
    const change = { id: w.id, expectedPhase: w.phase, expectedEpoch: w.executionEpoch };
    switch (verdict.kind) {
      case "Ready":
        ready.push(w);
        break;
      case "Wait":
        if (w.reason === "DEPENDENCY" && w.message === verdict.message) break;
        transitions.push({
          workload: { ...change, phase: w.phase, reason: "DEPENDENCY", message: verdict.message },
        });
        break;
      case "Never":
        transitions.push({
          workload: {
            ...change,
            phase: "CANCELLED",
            reason: "DEPENDENCY_NEVER_SATISFIED",
            message: verdict.message,
          },
        });
        break;
      default: {
        const never: never = verdict;
        throw new Error(`unhandled dependency verdict ${JSON.stringify(never)}`);
      }
    }
  }
  write(env, transitions);
  return ready;
}
