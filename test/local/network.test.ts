/**
 * A profile's network, the pure half: `none` puts `--unshare-net` on the sandbox's command
 * line (and `host` does not), a launch that cannot get its own network is refused instead
 * of run with the host's, and a worker without network is told the gateway's unix socket,
 * which is bound into its sandbox read-only.
 */
import { describe, expect, test } from "bun:test";
import { buildJobRecord, validateLaunch } from "../../src/adapters/backend-local/launch.ts";
import { bubblewrapArgv } from "../../src/adapters/isolation-bwrap/bubblewrap.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import type { ResourceProfile } from "../../src/core/models.ts";
import type { SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import type { LaunchWrapper } from "../../src/core/sandbox.ts";

const CONFIG = { bwrap: "/usr/bin/bwrap", maskedRoots: [], readOnlyExtra: [], runAs: null };
const PATHS = { writable: ["/spool/w/workspace"], readOnly: [] };

function profile(network: "host" | "none"): ResourceProfile {
  return {
    name: "p",
    description: "p",
    kinds: ["BATCH", "SESSION"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 512, timeLimitSeconds: null },
    network,
  };
}

function request(kind: "COMMAND" | "WORKER"): SubmitRequest {
  const launch =
    kind === "COMMAND"
      ? { kind, command: ["python3"], env: {} }
      : {
          kind,
          workerCommand: ["/opt/o4s/openai4s-worker"],
          ranks: 1,
          credentialDir: "/state/c/a1",
          env: {},
        };
  return {
    token: "o4s-abcdefghijklmnopqrstuvwxyz",
    workloadId: "w1",
    allocationId: "a1",
    epoch: 1,
    workloadKind: kind === "COMMAND" ? "BATCH" : "SESSION",
    profile: "p",
    timeLimitSeconds: null,
    allocationDir: "/spool/w1/a1",
    workspaceDir: "/spool/w1/workspace",
    launch,
  } as unknown as SubmitRequest;
}

describe("the sandbox's network", () => {
  test("none: its own namespace; host (and unsaid): the host's", () => {
    expect(bubblewrapArgv(CONFIG, ["python3"], PATHS, { vars: {} }, { network: "none" })).toContain(
      "--unshare-net",
    );
    expect(
      bubblewrapArgv(CONFIG, ["python3"], PATHS, { vars: {} }, { network: "host" }),
    ).not.toContain("--unshare-net");
    expect(bubblewrapArgv(CONFIG, ["python3"], PATHS, { vars: {} })).not.toContain("--unshare-net");
  });
});

describe("a launch that cannot get its own network is refused, never run with the host's", () => {
  test("no sandbox", () => {
    expect(validateLaunch(request("COMMAND"), [profile("none")], false)).toContain(
      'network "none"',
    );
    expect(validateLaunch(request("COMMAND"), [profile("host")], false)).toBeNull();
    expect(validateLaunch(request("COMMAND"), [profile("none")], true)).toBeNull();
  });

  test("a worker, and the gateway has no unix socket", () => {
    expect(validateLaunch(request("WORKER"), [profile("none")], true, null)).toContain(
      "unix socket",
    );
    expect(
      validateLaunch(request("WORKER"), [profile("none")], true, "/state/worker.sock"),
    ).toBeNull();
  });
});

test("a worker without network dials the socket, bound in read-only; one with network does not", () => {
  const seen: {
    argv: readonly string[];
    readOnly: readonly string[];
    network: string | undefined;
  }[] = [];
  const wrapper: LaunchWrapper = {
    sandboxed: true,
    identities: fixedIdentities(null),
    wrap(argv, paths, _env, _runAs, reach) {
      seen.push({ argv, readOnly: paths.readOnly, network: reach?.network });
      return argv;
    },
    prepare: () => null,
  };
  const context = {
    wrapper,
    baseEnv: {},
    killGraceMs: 0,
    sandboxReadOnly: [],
    now: 0,
    limits: { kind: "None" as const, why: "test" },
    workerSocket: "/state/worker.sock",
  };
  const none = buildJobRecord(request("WORKER"), { ...context, profiles: [profile("none")] }, null);
  expect(seen[0]?.argv.slice(-2)).toEqual(["--gateway-socket", "/state/worker.sock"]);
  expect(seen[0]?.readOnly).toContain("/state/worker.sock");
  expect([seen[0]?.network, none.network]).toEqual(["none", "none"]);
  buildJobRecord(request("WORKER"), { ...context, profiles: [profile("host")] }, null);
  expect(seen[1]?.argv).not.toContain("--gateway-socket");
  expect(seen[1]?.readOnly).not.toContain("/state/worker.sock");
  // A BATCH job of a none profile gets no socket: it has no business with the gateway.
  buildJobRecord(request("COMMAND"), { ...context, profiles: [profile("none")] }, null);
  expect(seen[2]?.readOnly).not.toContain("/state/worker.sock");
});
