/**
 * The backend contract (test/support/backend-contract.ts) against the local backend as the
 * daemon composes it for sessions: given a sandbox (its record then holds sessionIsolation)
 * and behind the BATCH gate (batchGate). The two capabilities no bare backend holds, and
 * proof that the wrappers keep the contract. The sandbox here is a stand-in that only
 * clears the environment, so the run needs no bubblewrap; the real one has its own tests.
 */
import { afterEach } from "bun:test";
import { createLocalBackend } from "../../src/adapters/backend-local/backend.ts";
import { envArgv } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { gatedUnsandboxedBatch } from "../../src/core/isolation/batch-gate.ts";
import type { Sandbox } from "../../src/core/sandbox.ts";
import { backendContract } from "../support/backend-contract.ts";
import { backendOptions, cleanUpStates, makeRequest, makeState } from "../support/local-backend.ts";

afterEach(() => {
  cleanUpStates();
});

const standIn: Sandbox = {
  mechanism: "env-clearing stand-in (test)",
  sandboxed: true,
  identities: fixedIdentities(null),
  // The plain launch's own env line: the job's variables, and those inherited by name (an
  // array element's index) from the supervisor's launch.
  wrap: (argv, _paths, env) => envArgv(argv, env),
  prepare: () => null,
  verify: async () => ({ kind: "Verified", mechanism: "env-clearing stand-in (test)" }),
};

backendContract({
  name: "local, sandboxed and gated",
  capabilities: {
    tasks: true,
    changes: true,
    terminalFacts: true,
    sessionIsolation: true,
    launchSandbox: true,
    batchGate: true,
    jobEnv: false,
  },
  phaseTimeoutMs: 20_000,
  arrays: true,
  make() {
    const state = makeState();
    const local = createLocalBackend({ ...backendOptions(state), sandbox: standIn });
    return {
      backend: gatedUnsandboxedBatch(local, {
        jobsKeepDaemonUid: true,
        allowUnsandboxedBatch: false,
      }),
      request: (script) => makeRequest(state, ["/bin/sh", "-c", script]),
      advance() {},
      // The supervisors and job groups are killed and the state removed by cleanUpStates.
      async close() {},
    };
  },
});
