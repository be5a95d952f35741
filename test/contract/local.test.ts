/**
 * The backend contract (test/support/backend-contract.ts) against the local backend: real
 * supervisors and processes on this machine, no sandbox.
 */
import { afterEach } from "bun:test";
import { localBackendPlugin } from "../../src/adapters/backend-local/plugin.ts";
import { backendContract } from "../support/backend-contract.ts";
import { cleanUpStates, makeBackend, makeRequest, makeState } from "../support/local-backend.ts";

afterEach(() => {
  cleanUpStates();
});

backendContract({
  name: "local",
  // What its plugin declares: the suite holds the declaration to the record.
  capabilities: localBackendPlugin.capabilities,
  phaseTimeoutMs: 20_000,
  arrays: true,
  make() {
    const state = makeState();
    return {
      backend: makeBackend(state),
      request: (script) => makeRequest(state, ["/bin/sh", "-c", script]),
      advance() {},
      // The supervisors and job groups are killed and the state removed by cleanUpStates.
      async close() {},
    };
  },
});
