/** Shared helpers for the Slurm backend tests (unit and real-cluster). */
import { randomBytes } from "node:crypto";
import type { PlacementCatalog, SlurmPlacement } from "../../src/adapters/backend-slurm/backend.ts";
import {
  externalHandle,
  mintSubmissionToken,
  type ResourceProfile,
  type SubmissionToken,
} from "../../src/core/models.ts";
import type {
  Launch,
  ObservationTarget,
  SubmitRequest,
} from "../../src/core/ports/allocation-backend.ts";

export function newToken(): SubmissionToken {
  return mintSubmissionToken((n) => new Uint8Array(randomBytes(n)));
}

export const BASE_PLACEMENT: SlurmPlacement = {
  partition: "debug",
  qos: null,
  account: null,
  nodes: 1,
  cpus: 1,
  gpus: 0,
  memoryMb: 100,
  timeLimitSeconds: 600,
};

export function catalog(placements: Readonly<Record<string, SlurmPlacement>>): PlacementCatalog {
  return {
    profiles: (): readonly ResourceProfile[] =>
      Object.entries(placements).map(([name, p]) => ({
        name,
        description: `test profile ${name}`,
        kinds: ["BATCH", "SESSION"],
        resources: {
          nodes: p.nodes,
          cpus: p.cpus,
          gpus: p.gpus,
          memoryMb: p.memoryMb,
          timeLimitSeconds: p.timeLimitSeconds,
        },
        ...(p.maxima === undefined ? {} : { maxima: p.maxima }),
        ...(p.warnBeforeLimitSeconds != null
          ? { warnBeforeLimitSeconds: p.warnBeforeLimitSeconds }
          : {}),
      })),
    placement: (name) => placements[name] ?? null,
  };
}

export function request(
  dir: string,
  launch: Launch,
  overrides: Partial<SubmitRequest> = {},
): SubmitRequest {
  const token = overrides.token ?? newToken();
  const allocationId = overrides.allocationId ?? `a-${token.slice(4, 14)}`;
  return {
    allocationId,
    workloadId: `w-${token.slice(4, 14)}`,
    workloadKind: launch.kind === "WORKER" ? "SESSION" : "BATCH",
    token,
    epoch: 1,
    profile: "cpu",
    name: "test",
    launch,
    timeLimitSeconds: null,
    allocationDir: `${dir}/allocations/${allocationId}`,
    workspaceDir: `${dir}/workspace-${allocationId}`,
    ...overrides,
  };
}

export function command(argv: readonly string[], env: Record<string, string> = {}): Launch {
  return { kind: "COMMAND", command: argv, env };
}

export function target(req: SubmitRequest, handle: string): ObservationTarget {
  return { allocationId: req.allocationId, token: req.token, handle: externalHandle(handle) };
}
