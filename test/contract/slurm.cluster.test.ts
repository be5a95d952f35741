/**
 * The backend contract (test/support/backend-contract.ts) against the real Slurm backend on
 * the test cluster. Runs only when OPENAI4S_SLURM_TEST_DIR names one (scripts/
 * slurm-test-cluster.sh), like every `*.cluster.test.ts`.
 */
import { describe } from "bun:test";
import { createSlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import { slurmBackendPlugin } from "../../src/adapters/backend-slurm/plugin.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { backendContract } from "../support/backend-contract.ts";
import { realBroker, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm", () => {
  const cluster = testCluster as TestCluster;
  backendContract({
    name: "slurm",
    // What its plugin declares: the suite holds the declaration to the record.
    capabilities: slurmBackendPlugin.capabilities,
    // A job starts within the controller's scheduling pass and its end reaches accounting
    // within seconds on the test cluster; the margin is for a machine other suites load too.
    phaseTimeoutMs: 60_000,
    refusedEnvName: "SLURM_NTASKS",
    make() {
      const dir = makeTempDir("o4s-contract-slurm-");
      const backend = createSlurmBackend({
        broker: realBroker(cluster),
        placements: catalog({ cpu: BASE_PLACEMENT }),
        clock: systemClock,
        log: silentLog,
      });
      return {
        backend,
        request: (script) => request(dir, command(["/bin/sh", "-c", script])),
        advance() {},
        async close() {
          removeDir(dir);
        },
      };
    },
  });
});
