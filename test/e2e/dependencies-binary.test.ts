/**
 * Dependencies and staged input through the built binary's daemon (local backend, issue
 * 35): a dependent starts only after its parent COMPLETED; a parent that failed ends its
 * afterok dependent CANCELLED, DEPENDENCY_NEVER_SATISFIED, naming the parent; a workload
 * created held runs only once released, with the input uploaded meanwhile (no polling).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, ms, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const daemons: Daemon[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});

async function up(): Promise<Daemon> {
  ensureBuilt();
  const d = await startDaemon({ gateway: false });
  daemons.push(d);
  return d;
}

async function submit(d: Daemon, ...args: string[]): Promise<string> {
  const r = await d.cli("submit", ...args);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}\n${d.log()}`);
  return r.stdout.trim().split(/\s+/).at(-1) ?? "";
}

interface Ended {
  readonly phase: string;
  readonly reason: string | null;
  readonly message: string | null;
  readonly allocations: readonly {
    startedAt: string | number | null;
    endedAt?: string | number | null;
  }[];
}

async function ended(d: Daemon, id: string): Promise<Ended> {
  return (await eventually(
    async () => {
      const w = (await d.show(id)) as unknown as Ended;
      if (!["COMPLETED", "FAILED", "CANCELLED", "LOST"].includes(w.phase)) {
        throw new Error(`${id} still ${w.phase}`);
      }
      return w;
    },
    { timeoutMs: 60_000 },
  )) as Ended;
}

describe("dependencies (local backend)", () => {
  test("afterok starts after the parent completed; a failed parent cancels its dependent", async () => {
    const d = await up();
    const parent = await submit(d, "--", "/bin/sh", "-c", "sleep 1");
    const child = await submit(d, "--after-ok", parent, "--", "/bin/true");
    const failing = await submit(d, "--", "/bin/sh", "-c", "sleep 0.5; exit 3");
    const orphan = await submit(d, "--dependency", `afterok:${failing}`, "--", "/bin/true");
    const any = await submit(d, "--after", failing, "--", "/bin/true");

    const p = await ended(d, parent);
    const c = await ended(d, child);
    expect(p.phase).toBe("COMPLETED");
    expect(c.phase).toBe("COMPLETED");
    const parentEnd = ms(p.allocations.at(-1)?.endedAt ?? null);
    const childStart = ms(c.allocations.at(-1)?.startedAt ?? null);
    expect(childStart).toBeGreaterThanOrEqual(parentEnd);

    const o = await ended(d, orphan);
    expect({ phase: o.phase, reason: o.reason, allocations: o.allocations.length }).toEqual({
      phase: "CANCELLED",
      reason: "DEPENDENCY_NEVER_SATISFIED",
      allocations: 0,
    });
    expect(o.message).toContain(failing);
    expect((await ended(d, any)).phase).toBe("COMPLETED");
  }, 120_000);

  test("a dependency on a workload that does not exist is a 404 naming the field", async () => {
    const d = await up();
    const r = await d.cli("submit", "--after-ok", "w-nosuchworkload", "--", "/bin/true");
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("afterOk[0]");
  }, 60_000);
});

describe("staged input (local backend)", () => {
  test("held: nothing runs until released; the input uploaded meanwhile is read", async () => {
    const d = await up();
    const id = await submit(d, "--hold", "--", "/bin/sh", "-c", "tr a-z A-Z < in.txt > out.txt");
    const held = (await d.show(id)) as unknown as { phase: string; reason: string; held: boolean };
    expect(held).toMatchObject({ phase: "PENDING", reason: "AWAITING_RELEASE", held: true });
    const local = join(d.dir, "in.txt");
    writeFileSync(local, "staged\n");
    const put = await d.cli("cp", local, `${id}:in.txt`);
    expect({ code: put.code, err: put.stderr }).toEqual({ code: 0, err: "" });
    // Still held after the upload: the reconciler has had its ticks and submitted nothing.
    expect(((await d.show(id)) as unknown as { allocations: unknown[] }).allocations).toEqual([]);
    const rel = await d.cli("release", id);
    expect({ code: rel.code, err: rel.stderr }).toEqual({ code: 0, err: "" });
    expect((await ended(d, id)).phase).toBe("COMPLETED");
    const back = join(d.dir, "out.txt");
    expect((await d.cli("cp", `${id}:out.txt`, back)).code).toBe(0);
    expect(readFileSync(back, "utf8")).toBe("STAGED\n");
  }, 120_000);
});
