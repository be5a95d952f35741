/**
 * Issue 33: on a cluster, a profile with mounts failed its jobs (SUBMIT_REJECTED) until the
 * nodes' first sandbox probe concluded. Its attempts now wait for that verdict; once it is
 * known they go to the launch, sandboxed or refused there by name.
 */
import { describe, expect, test } from "bun:test";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import { mountsAwaitVerdict } from "../../src/core/isolation/mounts-await-verdict.ts";
import type { Allocation, ResourceProfile, Workload } from "../../src/core/models.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const plainProfile = {
  name: "plain",
  description: "",
  kinds: ["BATCH"],
  resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
} as const satisfies ResourceProfile;
const dataProfile: ResourceProfile = {
  ...plainProfile,
  name: "data",
  mounts: [{ source: "/srv/ref", target: "/ref", mode: "ro" }],
};

function setup() {
  const state = { sandboxing: false, pending: true, reached: 0 };
  const inner: AttemptPreparer = {
    prepare: async () => {
      state.reached += 1;
      return { kind: "Refused", reason: "INTERNAL_ERROR", message: "reached" };
    },
  };
  const backend = fakeBackend({
    profiles: () => [plainProfile, dataProfile],
    capabilities: {
      launchSandbox: {
        launchesSandboxed: () => state.sandboxing,
        sandboxPending: () => state.pending,
      },
    },
  });
  const preparer = mountsAwaitVerdict(inner, backend);
  const prepare = (profile: string) =>
    preparer.prepare({ id: "w", kind: "BATCH", profile } as Workload, { id: "a" } as Allocation);
  return { state, prepare };
}

describe("attempts of a profile with mounts", () => {
  test("wait while the nodes' first sandbox verdict is pending, naming the profile", async () => {
    const { state, prepare } = setup();
    expect(await prepare("data")).toEqual({
      kind: "NotYet",
      message: expect.stringContaining("profile data declares mounts"),
    });
    expect(state.reached).toBe(0);
  });

  test("go on once the sandbox is on, or once the verdict is known to be against it", async () => {
    const { state, prepare } = setup();
    state.sandboxing = true;
    expect((await prepare("data")).kind).toBe("Refused");
    state.sandboxing = false;
    state.pending = false;
    // Concluded Unverified: the launch refuses it by name; waiting would never end.
    expect((await prepare("data")).kind).toBe("Refused");
    expect(state.reached).toBe(2);
  });

  test("a profile without mounts never waits", async () => {
    const { state, prepare } = setup();
    expect((await prepare("plain")).kind).toBe("Refused");
    expect(state.reached).toBe(1);
  });

  test("a backend that does not say is never pending", async () => {
    let reached = 0;
    const backend = fakeBackend({
      profiles: () => [dataProfile],
      capabilities: { launchSandbox: { launchesSandboxed: () => false } },
    });
    const preparer = mountsAwaitVerdict(
      {
        prepare: async () => {
          reached += 1;
          return { kind: "Refused", reason: "INTERNAL_ERROR", message: "reached" };
        },
      },
      backend,
    );
    await preparer.prepare({ profile: "data" } as Workload, { id: "a" } as Allocation);
    expect(reached).toBe(1);
  });
});
