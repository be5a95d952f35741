/**
 * A profile's mounts exist only inside the sandbox's mount namespace, so its jobs can start
 * only once the backend sandboxes its launches. On a cluster that is known only after the
 * first probe of the nodes has run; until then every launch goes out plain, and a job of a
 * profile with mounts was refused at once (issue 33: FAILED / SUBMIT_REJECTED on every
 * fresh state dir, for as long as the probe's own job waited in the queue). Here such an
 * attempt waits for the verdict instead, as a SESSION's admission does: prepared again on a
 * later tick, never submitted plain. A conclusive Unverified verdict lets it through to the
 * launch, which refuses it naming the profile and why.
 */
import type { AttemptPreparer } from "../attempt-preparer.ts";
import {
  type AllocationBackend,
  launchesSandboxed,
  sandboxPending,
} from "../ports/allocation-backend.ts";

export function mountsAwaitVerdict(
  preparer: AttemptPreparer,
  backend: AllocationBackend,
): AttemptPreparer {
  return {
    prepare(workload, allocation) {
      const profile = backend.profiles().find((p) => p.name === workload.profile);
      const needsSandbox = (profile?.mounts ?? []).length > 0;
      if (needsSandbox && !launchesSandboxed(backend) && sandboxPending(backend)) {
        return Promise.resolve({
          kind: "NotYet",
          message: `profile ${workload.profile} declares mounts: waiting for the first check of the nodes' sandbox`,
        });
      }
      return preparer.prepare(workload, allocation);
    },
  };
}
