/**
 * The isolation verdict survives a restart (issue 21): stored with its time, binary and
 * nodes; used by the same binary within its time to live; anything else is unverified.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { type OpenedDatabase, openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { bindIsolationVerdictStore } from "../../src/adapters/store-sqlite/stores/isolation-verdict-store.ts";
import { binaryIdentity } from "../../src/apps/daemon/composition/binary-identity.ts";
import {
  judgeRememberedVerdict,
  REMEMBERED_VERDICT_TTL_MS,
} from "../../src/core/isolation/remembered-verdict.ts";
import type { StoredIsolationVerdict } from "../../src/core/ports/isolation-verdict-store.ts";
import { tempDirs } from "../support/temp-dir.ts";

const STORED: StoredIsolationVerdict = {
  backend: "slurm",
  mechanism: "bubblewrap on the slurm nodes",
  verifiedAt: 1_000_000,
  binary: "1.2.3 /opt/openai4s:100:5",
  nodes: ["n1"],
};
const now = (nowMs: number, binary = STORED.binary) => ({
  nowMs,
  binary,
  ttlMs: REMEMBERED_VERDICT_TTL_MS,
});

describe("judgeRememberedVerdict", () => {
  test("the same binary, within the time to live: Verified, saying it is remembered", () => {
    const judged = judgeRememberedVerdict(STORED, now(STORED.verifiedAt + 60_000));
    expect(judged.kind).toBe("Usable");
    if (judged.kind !== "Usable") throw new Error("unreachable");
    expect(judged.verdict.kind).toBe("Verified");
    expect(judged.verdict.mechanism).toContain("remembered");
    expect(judged.verdict.mechanism).toContain("n1");
  });

  test.each([
    ["nothing stored", null, now(STORED.verifiedAt), /no verdict/],
    [
      "another binary",
      STORED,
      now(STORED.verifiedAt + 1, "1.2.4 /opt/openai4s:101:6"),
      /another binary/,
    ],
    [
      "older than its time to live",
      STORED,
      now(STORED.verifiedAt + REMEMBERED_VERDICT_TTL_MS + 1),
      /old/,
    ],
    ["from the future (a clock set back)", STORED, now(STORED.verifiedAt - 1), /old/],
  ] as const)("%s: unverified", (_what, stored, at, why) => {
    const judged = judgeRememberedVerdict(stored, at);
    expect(judged.kind).toBe("Unusable");
    expect(judged.kind === "Unusable" ? judged.message : "").toMatch(why);
  });
});

describe("the store keeps it across a reopen", () => {
  const tempDir = tempDirs("o4s-verdict-");
  let opened: OpenedDatabase | null = null;
  afterEach(() => opened?.sqlite.close());

  test("saved, read back after reopening, replaced, forgotten", () => {
    const path = join(tempDir(), "openai4s.db");
    opened = openDatabase(path);
    const clock = { now: () => 0 };
    bindIsolationVerdictStore({ db: opened.db, clock }).save(STORED);
    opened.sqlite.close();
    opened = openDatabase(path);
    const store = bindIsolationVerdictStore({ db: opened.db, clock });
    expect(store.load("slurm")).toEqual(STORED);
    expect(store.load("local")).toBeNull();
    store.save({ ...STORED, verifiedAt: 2_000_000, nodes: ["n1", "n2"] });
    expect(store.load("slurm")).toEqual({ ...STORED, verifiedAt: 2_000_000, nodes: ["n1", "n2"] });
    store.forget("slurm");
    expect(store.load("slurm")).toBeNull();
  });
});

describe("binaryIdentity", () => {
  const tempDir = tempDirs("o4s-binary-");
  test("differs between two executables of one version", async () => {
    const dir = tempDir();
    const a = join(dir, "a");
    await Bun.write(a, "one");
    const before = binaryIdentity([a]);
    await Bun.write(a, "a rebuilt binary");
    expect(binaryIdentity([a])).not.toBe(before);
    expect(binaryIdentity([a])).toBe(binaryIdentity([a]));
  });
});
