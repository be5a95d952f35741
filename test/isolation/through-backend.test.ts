/**
 * The node-side probe and the sandboxing decorator, exercised through a real backend (the
 * local one, raw: the decorator is what sandboxes it here). The same code runs against the
 * Slurm dev cluster in test/session/slurm-session.cluster.test.ts.
 */

import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { createLocalBackend } from "../../src/adapters/backend-local/backend.ts";
import { verifyThroughBackend } from "../../src/adapters/isolation-bwrap/backend-probe.ts";
import { createBubblewrapSandbox } from "../../src/adapters/isolation-bwrap/bubblewrap.ts";
import { plainWrapper } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import {
  locateInStateDir,
  sandboxedBackend,
  wrappedBackend,
} from "../../src/adapters/isolation-bwrap/through-backend.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { decorateBackend } from "../../src/core/decorate-backend.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { type ExternalHandle, mintSubmissionToken } from "../../src/core/models.ts";
import type { IsolationVerdict } from "../../src/core/ports/allocation-backend.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { selfCommand } from "../../src/lib/self-command.ts";
import { killProcessesMentioning } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import { TEST_RUN_AS } from "../support/run-as.ts";
import { tempDirs } from "../support/temp-dir.ts";

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) killProcessesMentioning(d);
});
// After the hook above (hooks run in order): a probe job still running would write into them.
const tempDir = tempDirs("o4s-through-", "each");

function setup(bwrapPath?: string) {
  const root = tempDir();
  made.push(root);
  const layout = stateLayout(join(root, "state"));
  mkdirSync(layout.root, { recursive: true });
  mkdirSync(layout.spool, { mode: 0o711 });
  const backend = createLocalBackend({
    backendDir: layout.backendDir("local"),
    spoolDir: layout.spool,
    selfCommand: selfCommand(),
    clock: systemClock,
    log: silentLog,
    hostEnv: { PATH: process.env["PATH"], HOME: process.env["HOME"] },
    killGraceMs: 500,
    plainLaunch: plainWrapper(fixedIdentities(null)),
  });
  const sandbox = createBubblewrapSandbox({
    runAs: TEST_RUN_AS,
    log: silentLog,
    maskedRoots: [layout.root],
    ...(bwrapPath === undefined ? {} : { bwrapPath }),
  });
  return { root, layout, backend, sandbox };
}

describe("verifyThroughBackend", () => {
  test("is Verified when the probe allocation runs in bubblewrap", async () => {
    const { layout, backend, sandbox } = setup();
    const verdict = await verifyThroughBackend({
      backend,
      sandbox,
      probeRoot: join(layout.backendSpoolDir("local"), "isolation-probe"),
      profile: "default",
      clock: systemClock,
      log: silentLog,
      pollIntervalMs: 50,
    });
    expect(verdict).toEqual({
      kind: "Verified",
      mechanism: expect.stringContaining("local nodes"),
      // The node it ran on, kept with a remembered verdict (here: this machine).
      nodes: [hostname()],
    });
  }, 30_000);

  test("is Unverified when the node's bwrap does not isolate", async () => {
    const fakeDir = tempDir();
    const fake = join(fakeDir, "bwrap");
    writeFileSync(
      fake,
      '#!/bin/sh\nwhile [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n',
    );
    chmodSync(fake, 0o755);
    const { layout, backend, sandbox } = setup(fake);
    const verdict = await verifyThroughBackend({
      backend,
      sandbox,
      probeRoot: join(layout.backendSpoolDir("local"), "isolation-probe"),
      profile: "default",
      clock: systemClock,
      log: silentLog,
      pollIntervalMs: 50,
    });
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind === "Unverified") {
      expect(verdict.message).toContain("sibling process was visible");
      expect(verdict.message).toContain("/etc/shadow existed for the probe");
    }
  }, 30_000);

  test("is Unverified when the probe cannot be placed", async () => {
    const { layout, backend, sandbox } = setup();
    const verdict = await verifyThroughBackend({
      backend,
      sandbox,
      probeRoot: join(layout.backendSpoolDir("local"), "isolation-probe"),
      profile: "no-such-profile",
      clock: systemClock,
      log: silentLog,
    });
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind === "Unverified") expect(verdict.message).toContain("refused");
  });

  test("stopping it (the daemon shuts down) cancels the probe allocation and concludes nothing", async () => {
    const { layout, backend, sandbox } = setup();
    const stopping = new AbortController();
    const cancelled: string[] = [];
    // The daemon stops while the probe is being watched: nothing seen yet, then the abort.
    const watched = decorateBackend(backend, {
      observe: async () => {
        stopping.abort();
        return { kind: "Observed", observations: new Map() };
      },
      cancel: async (targets) => {
        cancelled.push(...targets.map((t) => t.allocationId));
        return backend.cancel(targets);
      },
    });
    const verdict = await verifyThroughBackend({
      backend: watched,
      sandbox,
      probeRoot: join(layout.backendSpoolDir("local"), "isolation-probe"),
      profile: "default",
      clock: systemClock,
      log: silentLog,
      pollIntervalMs: 60_000,
      signal: stopping.signal,
    });
    expect(verdict.kind).toBe("Inconclusive");
    expect(cancelled).toHaveLength(1);
  }, 30_000);

  /**
   * The deadline, on a clock that jumps: a probe never seen leaving the queue says nothing
   * about the nodes (Inconclusive, so an earlier good verdict stands), while one that ran and
   * never ended is Unverified. Either way the allocation is cancelled.
   */
  for (const [phase, kind, says] of [
    ["QUEUED", "Inconclusive", "still queued: no result within 1 s"],
    ["RUNNING", "Unverified", "no result within 1 s"],
  ] as const) {
    test(`a probe still ${phase} at the deadline is ${kind}, and cancelled`, async () => {
      const { layout, backend, sandbox } = setup();
      const cancelled: string[] = [];
      const stuck = decorateBackend(backend, {
        observe: async (targets) => ({
          kind: "Observed",
          observations: new Map(
            targets.map((t) => [
              t.allocationId,
              {
                kind: "Observed",
                phase,
                reason: null,
                message: null,
                exitCode: null,
                startedAt: null,
                endedAt: null,
              },
            ]),
          ),
        }),
        cancel: async (targets) => {
          cancelled.push(...targets.map((t) => t.allocationId));
          return backend.cancel(targets);
        },
      });
      let nowMs = 0;
      const verdict = await verifyThroughBackend({
        backend: stuck,
        sandbox,
        probeRoot: join(layout.backendSpoolDir("local"), "isolation-probe"),
        profile: "default",
        // Each look at the clock is 400 ms later: past the 1 s deadline on the third poll.
        clock: { now: () => (nowMs += 400) },
        log: silentLog,
        timeoutMs: 1000,
        pollIntervalMs: 1,
      });
      expect(verdict.kind).toBe(kind);
      if (verdict.kind !== "Verified") expect(verdict.message).toContain(says);
      expect(cancelled).toHaveLength(1);
    }, 30_000);
  }

  test("a probe asked for after the stop submits nothing", async () => {
    const { layout, backend, sandbox } = setup();
    let submitted = 0;
    const counted = decorateBackend(backend, {
      submit: async (requests) => {
        submitted += requests.length;
        return backend.submit(requests);
      },
    });
    const verdict = await verifyThroughBackend({
      backend: counted,
      sandbox,
      probeRoot: join(layout.backendSpoolDir("local"), "isolation-probe"),
      profile: "default",
      clock: systemClock,
      log: silentLog,
      signal: AbortSignal.abort(),
    });
    expect(verdict.kind).toBe("Inconclusive");
    expect(submitted).toBe(0);
  });
});

describe("sandboxedBackend", () => {
  test("every launch and every step runs in the allocation's sandbox", async () => {
    const { layout, backend, sandbox } = setup();
    const verify = async (): Promise<IsolationVerdict> => ({ kind: "Verified", mechanism: "test" });
    const sandboxed = sandboxedBackend(backend, {
      wrapper: sandbox,
      verify,
      locate: locateInStateDir(layout),
      spoolDir: layout.spool,
      rankEnv: "OPENAI4S_RANK",
      baseEnv: { PATH: "/usr/bin:/bin" },
    });
    expect(await sandboxed.capabilities.sessionIsolation.verifySessionIsolation()).toEqual({
      kind: "Verified",
      mechanism: "test",
    });
    // A sibling's file and the state dir's secrets, both of which the sandbox must hide.
    const sibling = join(layout.workspaceDir("w2"), "secret");
    mkdirSync(layout.workspaceDir("w2"), { recursive: true });
    writeFileSync(sibling, "theirs");
    writeFileSync(layout.signingKey, "key", { mode: 0o600 });
    const allocationDir = layout.allocationDir("w1", "a1");
    const workspaceDir = layout.workspaceDir("w1");
    mkdirSync(allocationDir, { recursive: true });
    mkdirSync(workspaceDir, { recursive: true });
    const token = mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n)));
    const script = `test -e ${sibling} && echo sibling-visible || echo sibling-hidden; test -e ${layout.signingKey} && echo key-visible || echo key-hidden; echo mine > out`;
    const results = await sandboxed.submit([
      {
        allocationId: "a1",
        workloadId: "w1",
        workloadKind: "BATCH",
        token,
        epoch: 1,
        profile: "default",
        name: "t",
        launch: { kind: "COMMAND", command: ["/bin/sh", "-c", `${script}; sleep 30`], env: {} },
        timeLimitSeconds: 60,
        allocationDir,
        workspaceDir,
      },
    ]);
    const created = results.get(token);
    if (created?.kind !== "Created") throw new Error(JSON.stringify(created));
    const target = { allocationId: "a1", token, handle: created.handle };
    await eventually(
      async () => {
        const o = await sandboxed.observe([target]);
        const obs = o.kind === "Observed" ? o.observations.get("a1") : undefined;
        return obs?.kind === "Observed" && obs.phase === "RUNNING";
      },
      { what: "the job RUNNING", timeoutMs: 15_000, intervalMs: 50 },
    );
    const stdout = join(allocationDir, "stdout.log");
    await eventually(() => readFileSync(stdout, "utf8").includes("key-"), {
      what: "the job's second line",
      timeoutMs: 15_000,
      intervalMs: 50,
    });
    expect(readFileSync(stdout, "utf8").trim().split("\n")).toEqual([
      "sibling-hidden",
      "key-hidden",
    ]);
    expect(readFileSync(join(workspaceDir, "out"), "utf8")).toBe("mine\n");
    const tasks = sandboxed.capabilities.tasks;
    if (tasks === null) throw new Error("the local backend runs steps");
    const step = await tasks.runTask(
      target,
      ["/bin/sh", "-c", `test -e ${sibling} && echo visible || echo hidden; cat out`],
      { timeoutMs: 10_000 },
    );
    expect(step).toMatchObject({ kind: "Completed", exitCode: 0, stdout: "hidden\nmine\n" });
    const unknown = await tasks.runTask({ ...target, allocationId: "nope" }, ["true"], {
      timeoutMs: 1000,
    });
    expect(unknown.kind).toBe("Refused");
    await sandboxed.cancel([target]);
  }, 30_000);
});

describe("wrappedBackend", () => {
  test("a request whose identity cannot be claimed is Rejected alone; the rest are submitted", async () => {
    const root = tempDir();
    const submitted: string[] = [];
    const inner = fakeBackend({
      submit: async (requests) => {
        submitted.push(...requests.map((r) => r.allocationId));
        return new Map(
          requests.map((r) => [
            r.token,
            { kind: "Created", token: r.token, handle: r.token as unknown as ExternalHandle },
          ]),
        );
      },
    });
    const identities = {
      ...fixedIdentities(null),
      claim: (workspaceDir: string) => {
        if (workspaceDir.endsWith("full")) throw new Error("no free uid in 1-2");
        return null;
      },
    };
    const wrapped = wrappedBackend(inner, {
      wrapper: plainWrapper(identities),
      rankEnv: "RANK",
      baseEnv: {},
      locate: () => null,
      spoolDir: root,
    });
    const request = (id: string) => ({
      allocationId: id,
      workloadId: id,
      workloadKind: "BATCH" as const,
      token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
      epoch: 1,
      profile: "default",
      name: id,
      launch: { kind: "COMMAND" as const, command: ["true"], env: {} },
      timeLimitSeconds: null,
      allocationDir: join(root, id, "a"),
      workspaceDir: join(root, id),
    });
    const ok = request("ok");
    const full = request("full");
    const results = await wrapped.submit([full, ok]);
    expect(submitted).toEqual(["ok"]);
    expect(results.get(ok.token)?.kind).toBe("Created");
    const refused = results.get(full.token);
    expect(refused?.kind === "Rejected" && refused.message).toContain("no free uid in 1-2");
  });
});
