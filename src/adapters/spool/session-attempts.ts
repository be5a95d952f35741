/**
 * The SessionAttempts port over the files the session preparer writes: the attempt record
 * in the private attempt dir, the marker in the workspace.
 */
import type { StateLayout } from "../../core/layout.ts";
import type { SessionAttempts } from "../../core/ports/session-attempts.ts";
import type { SigningKey } from "../../wire/credential.ts";
import { readSessionAttempt, workspaceMarker, workspaceMarkerPath } from "./session-preparer.ts";

export function createSessionAttempts(deps: {
  readonly layout: StateLayout;
  readonly key: SigningKey;
}): SessionAttempts {
  const { layout, key } = deps;
  return {
    read: (workloadId, allocationId, maxRanks) =>
      readSessionAttempt(layout.attemptRecordDir(workloadId, allocationId), maxRanks),
    workspaceMarker: (workloadId, allocationId, epoch) => ({
      path: workspaceMarkerPath(layout.workspaceDir(workloadId)),
      expect: workspaceMarker(key, allocationId, epoch),
    }),
  };
}
