import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import {
  createSessionPreparer,
  readSessionAttempt,
  SESSION_ATTEMPT_FILE,
  workspaceMarker,
  workspaceMarkerPath,
} from "../../src/adapters/spool/session-preparer.ts";
import { getAllocation, getWorkload } from "../../src/adapters/store-sqlite/index.ts";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import { stateLayout } from "../../src/core/layout.ts";
import type { ResourceProfile } from "../../src/core/models.ts";
import type {
  AllocationBackend,
  IsolationVerdict,
} from "../../src/core/ports/allocation-backend.ts";
import { preparerByKind } from "../../src/core/preparer-by-kind.ts";
import {
  credentialPath,
  readCredentialFile,
  signingKeyFromBytes,
} from "../../src/wire/credential.ts";
import { FINGERPRINT_FILE, readGatewayFingerprint } from "../../src/wire/gateway-tls.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import {
  loseAttempt,
  newWorkload,
  startAttempt,
  type TestStore,
  testStore,
} from "../support/store-fixtures.ts";

let t: TestStore;
beforeEach(() => {
  t = testStore();
});
afterEach(() => {
  t.close();
});

const key = signingKeyFromBytes(randomBytes(32));

function profile(nodes: number): ResourceProfile {
  return {
    name: "default",
    description: "test",
    kinds: ["SESSION", "BATCH"],
    resources: { nodes, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
  };
}

/** A backend that only answers profiles() and (optionally) the isolation question. */
function backend(
  isolation: "missing" | IsolationVerdict | "throws",
  nodes = 1,
): AllocationBackend & { isolationCalls: number } {
  const b: AllocationBackend & { isolationCalls: number } = Object.assign(
    fakeBackend({
      profiles: () => [profile(nodes)],
      ...(isolation !== "missing" && {
        capabilities: {
          sessionIsolation: {
            async verifySessionIsolation(): Promise<IsolationVerdict> {
              b.isolationCalls += 1;
              if (isolation === "throws") throw new Error("probe crashed");
              return isolation;
            },
          },
        },
      }),
    }),
    { isolationCalls: 0 },
  );
  return b;
}

const VERIFIED: IsolationVerdict = { kind: "Verified", mechanism: "test" };

const PIN = Array.from({ length: 32 }, (_, i) => (i * 7).toString(16).padStart(2, "0"))
  .join(":")
  .toUpperCase();

function preparer(b: AllocationBackend, gatewayFingerprint: string | null = PIN): AttemptPreparer {
  const layout = stateLayout(join(t.dir, "state"));
  // The daemon makes the spool at start; the preparer reaches everything below it from there.
  mkdirSync(layout.spool, { recursive: true, mode: 0o711 });
  return createSessionPreparer({
    layout,
    key,
    clock: t.clock,
    random: (n) => randomBytes(n),
    gatewayAddress: "127.0.0.1:4000",
    gatewayFingerprint,
    workerCommand: ["/opt/openai4s/openai4s-worker"],
    credentialTtlMs: 60_000,
    backend: b,
  });
}

/** Every path under the state dir with a hash of its content: "byte for byte". */
function treeHash(root: string): string {
  const h = createHash("sha256");
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir).sort()) {
      const p = join(dir, entry);
      const s = statSync(p);
      h.update(`${relative(root, p)}:${s.mode}:`);
      if (s.isDirectory()) walk(p);
      else h.update(readFileSync(p));
    }
  };
  walk(root);
  return h.digest("hex");
}

function workloadAndAttempt(spec = {}) {
  const id = newWorkload(t.store, "SESSION", spec);
  const allocationId = startAttempt(t.store, id, { running: false });
  const w = getWorkload(t.store, id);
  const a = getAllocation(t.store, allocationId);
  if (!w || !a) throw new Error("setup");
  return { w, a };
}

describe("session preparer: isolation first", () => {
  for (const [label, isolation] of [
    ["a backend without the capability", "missing"],
    ["an Unverified capability", { kind: "Unverified", message: "no bwrap" }],
    ["a throwing check", "throws"],
  ] as const) {
    test(`${label} refuses with ISOLATION_UNAVAILABLE and writes nothing`, async () => {
      // Both halves of the layout: the private state dir (attempt records) and the spool,
      // where the workspace, the allocation dir and the credentials go.
      const { root: state, spool } = stateLayout(join(t.dir, "state"));
      mkdirSync(state, { recursive: true });
      mkdirSync(spool, { recursive: true });
      const before = [treeHash(state), treeHash(spool)];
      const { w, a } = workloadAndAttempt();
      const result = await preparer(backend(isolation)).prepare(w, a);
      expect(result.kind).toBe("Refused");
      if (result.kind === "Refused") expect(result.reason).toBe("ISOLATION_UNAVAILABLE");
      expect([treeHash(state), treeHash(spool)]).toEqual(before);
      expect([readdirSync(state), readdirSync(spool)]).toEqual([[], []]);
    });
  }
});

describe("session preparer: a verified backend", () => {
  test("derives a WORKER launch with per-rank 0600 credentials bound to (allocation, epoch)", async () => {
    const { w, a } = workloadAndAttempt({ env: { FOO: "bar" } });
    const b = backend(VERIFIED, 2);
    const result = await preparer(b).prepare(w, a);
    expect(b.isolationCalls).toBe(1);
    if (result.kind !== "Prepared") throw new Error(JSON.stringify(result));
    const { launch, allocationDir, workspaceDir } = result.attempt;
    const layout = stateLayout(join(t.dir, "state"));
    expect(allocationDir).toBe(layout.allocationDir(w.id, a.id));
    expect(workspaceDir).toBe(layout.workspaceDir(w.id));
    if (launch.kind !== "WORKER") throw new Error("not a worker launch");
    expect(launch.workerCommand).toEqual([
      "/opt/openai4s/openai4s-worker",
      "--credential-dir",
      launch.credentialDir,
    ]);
    expect(launch.ranks).toBe(2);
    expect(launch.env).toEqual({ FOO: "bar" });
    // Only the directory travels: no credential value in env or argv.
    expect(JSON.stringify(launch)).not.toContain("signature");
    expect(statSync(launch.credentialDir).mode & 0o777).toBe(0o700);
    for (const rank of [0, 1]) {
      const path = credentialPath(launch.credentialDir, rank);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const read = readCredentialFile(path);
      if (read.kind !== "Read") throw new Error(read.message);
      expect(read.file.gateway).toBe("127.0.0.1:4000");
      expect(read.file.credential).toMatchObject({ allocationId: a.id, epoch: a.epoch, rank });
    }
    expect(readFileSync(workspaceMarkerPath(workspaceDir), "utf8")).toBe(
      workspaceMarker(key, a.id, a.epoch),
    );
    // The attempt record is in the private dir, not in the allocation dir jobs can write.
    expect(existsSync(join(allocationDir, SESSION_ATTEMPT_FILE))).toBe(false);
    expect(readSessionAttempt(layout.attemptRecordDir(w.id, a.id), 2)).toEqual({
      kind: "Valid",
      record: { ranks: 2 },
    });
    expect(readSessionAttempt(layout.attemptRecordDir(w.id, a.id), 1)).toMatchObject({
      kind: "Invalid",
    });
    // The durable spec never learns of any of it.
    expect(getWorkload(t.store, w.id)?.spec).toEqual({ env: { FOO: "bar" } });
  });

  test("is re-executable: preparing the same attempt twice gives the same launch", async () => {
    const { w, a } = workloadAndAttempt();
    const p = preparer(backend(VERIFIED));
    const first = await p.prepare(w, a);
    const second = await p.prepare(w, a);
    expect(second).toEqual(first);
    if (second.kind !== "Prepared" || second.attempt.launch.kind !== "WORKER") throw new Error();
    const dir = second.attempt.launch.credentialDir;
    expect(readdirSync(dir).sort()).toEqual([FINGERPRINT_FILE, "rank-0.cred"].sort());
    // The pin beside the credentials is what the worker reads; plain TCP removes it.
    expect(readGatewayFingerprint(dir)).toEqual({ kind: "Pinned", fingerprint: PIN });
    expect(readdirSync(second.attempt.allocationDir)).toEqual(["credentials"]);
    await preparer(backend(VERIFIED), null).prepare(w, a);
    expect(readdirSync(dir)).toEqual(["rank-0.cred"]);
    expect(readGatewayFingerprint(dir)).toEqual({ kind: "Plain" });
  });

  test("a recovery is a new attempt: new epoch, new credentials, new marker", async () => {
    const { w, a } = workloadAndAttempt();
    const p = preparer(backend(VERIFIED));
    const first = await p.prepare(w, a);
    loseAttempt(t.store, w.id, a.id);
    const secondId = startAttempt(t.store, w.id, { running: false });
    const w2 = getWorkload(t.store, w.id);
    const a2 = getAllocation(t.store, secondId);
    if (!w2 || !a2) throw new Error("setup");
    expect(a2.epoch).toBe(a.epoch + 1);
    const second = await p.prepare(w2, a2);
    if (first.kind !== "Prepared" || second.kind !== "Prepared") throw new Error();
    if (first.attempt.launch.kind !== "WORKER" || second.attempt.launch.kind !== "WORKER") {
      throw new Error();
    }
    expect(second.attempt.allocationDir).not.toBe(first.attempt.allocationDir);
    const cred = readCredentialFile(credentialPath(second.attempt.launch.credentialDir, 0));
    if (cred.kind !== "Read") throw new Error();
    expect(cred.file.credential).toMatchObject({ allocationId: a2.id, epoch: a2.epoch });
    expect(workspaceMarker(key, a2.id, a2.epoch)).not.toBe(workspaceMarker(key, a.id, a.epoch));
    expect(readFileSync(workspaceMarkerPath(second.attempt.workspaceDir), "utf8")).toBe(
      workspaceMarker(key, a2.id, a2.epoch),
    );
  });
});

describe("preparer by kind", () => {
  test("BATCH never asks for isolation and never mints a credential", async () => {
    const b = backend(VERIFIED);
    const batchCalls: string[] = [];
    const composite = preparerByKind({
      SESSION: preparer(b),
      BATCH: {
        async prepare(w) {
          batchCalls.push(w.id);
          return { kind: "Refused", reason: "SUBMIT_REJECTED", message: "batch preparer reached" };
        },
      },
    });
    const id = newWorkload(t.store, "BATCH", { command: ["true"] });
    const allocationId = startAttempt(t.store, id, { running: false });
    const w = getWorkload(t.store, id);
    const a = getAllocation(t.store, allocationId);
    if (!w || !a) throw new Error("setup");
    const result = await composite.prepare(w, a);
    expect(result).toEqual({
      kind: "Refused",
      reason: "SUBMIT_REJECTED",
      message: "batch preparer reached",
    });
    expect(batchCalls).toEqual([id]);
    expect(b.isolationCalls).toBe(0);
    expect(existsSync(join(t.dir, "state"))).toBe(false);
  });
});
