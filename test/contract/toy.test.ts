/**
 * A third backend is one folder, one line in the list of backends and this file: the toy
 * backend (test/fixtures/backend-toy/, test-only) is listed by the one line below, its
 * settings read by the daemon's one parse, built by the daemon's createBackend, and held to
 * the backend contract (test/support/backend-contract.ts) with the capabilities its plugin
 * declares.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { BACKENDS } from "../../src/apps/daemon/composition/backends.ts";
import { createBackend } from "../../src/apps/daemon/composition/create-backend.ts";
import { parseDaemonSettings } from "../../src/apps/daemon/config.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { mintSubmissionToken } from "../../src/core/models.ts";
import type { AllocationBackend } from "../../src/core/ports/allocation-backend.ts";
import { registerBackend } from "../../src/core/ports/backend-plugin.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { noFaultPoints } from "../../src/lib/fault-point.ts";
import { silentLog } from "../../src/lib/log.ts";
import { TOY_CPUS_ENV, toyBackendPlugin } from "../fixtures/backend-toy/plugin.ts";
import { backendContract } from "../support/backend-contract.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

/** The list with the toy's one line. */
const backends = [...BACKENDS, registerBackend(toyBackendPlugin)];

const selfCommand = [process.execPath, join(import.meta.dir, "../../src/main.ts")];
const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) removeDir(dir);
});

/** The toy as the daemon builds it: its settings from `env` through the one parse. */
async function composedToy(dir: string, env: Record<string, string>): Promise<AllocationBackend> {
  const parsed = parseDaemonSettings(env, selfCommand, backends);
  if (parsed.kind !== "Parsed") throw new Error(JSON.stringify(parsed.errors));
  const created = await createBackend(
    "toy",
    {
      layout: stateLayout(join(dir, "state"), join(dir, "spool")),
      clusterConfigPath: null,
      selfCommand,
      clock: systemClock,
      log: silentLog,
      env,
      settings: parsed.settings,
      faults: noFaultPoints,
      identities: fixedIdentities(null),
    },
    backends,
  );
  if (created.kind !== "Created") throw new Error(created.message);
  return created.backend;
}

describe("the toy backend through the daemon's parse and composition", () => {
  test("its setting is read with the daemon's, and a bad value is named", async () => {
    const dir = makeTempDir("o4s-toy-");
    dirs.push(dir);
    const backend = await composedToy(dir, { [TOY_CPUS_ENV]: "4" });
    expect(backend.profiles()[0]?.resources.cpus).toBe(4);
    const bad = parseDaemonSettings({ [TOY_CPUS_ENV]: "four" }, selfCommand, backends);
    expect(bad).toMatchObject({ kind: "Invalid", errors: [{ variable: TOY_CPUS_ENV }] });
  });

  test("without its line in the list it is unknown", async () => {
    const parsed = parseDaemonSettings({}, selfCommand);
    if (parsed.kind !== "Parsed") throw new Error("default settings refused");
    const created = await createBackend("toy", {
      layout: stateLayout("/nonexistent/state", "/nonexistent/spool"),
      clusterConfigPath: null,
      selfCommand,
      clock: systemClock,
      log: silentLog,
      env: {},
      settings: parsed.settings,
      faults: noFaultPoints,
      identities: fixedIdentities(null),
    });
    expect(created).toMatchObject({ kind: "ConfigError" });
  });
});

let next = 0;

backendContract({
  name: "toy",
  capabilities: toyBackendPlugin.capabilities,
  phaseTimeoutMs: 10_000,
  async make() {
    const dir = makeTempDir("o4s-contract-toy-");
    const backend = await composedToy(dir, {});
    return {
      backend,
      request(script) {
        next += 1;
        const workspaceDir = join(dir, `w-${next}`);
        mkdirSync(workspaceDir);
        return {
          allocationId: `a-${next}`,
          workloadId: `w-${next}`,
          workloadKind: "BATCH",
          token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
          epoch: 1,
          profile: "default",
          name: "contract",
          launch: { kind: "COMMAND", command: ["/bin/sh", "-c", script], env: {} },
          timeLimitSeconds: null,
          allocationDir: workspaceDir,
          workspaceDir,
        };
      },
      advance() {},
      async close() {
        removeDir(dir);
      },
    };
  },
});
