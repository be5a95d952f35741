/**
 * `openai4s cp`: which side is the workspace, the names it keeps, that a download never
 * leaves a partial file under the asked name, and usage errors that say what to fix.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCpCommand } from "../../src/apps/cli/cp.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { UsageError } from "../../src/lib/command/command.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { captureIo, runtimeFor } from "../support/cli-runtime.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const open: Harness[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
  for (const d of dirs.splice(0)) removeDir(d);
});

async function setup() {
  const h = harness();
  open.push(h);
  mkdirSync(join(stateLayout(h.dir).spool, "workloads"), { recursive: true });
  const res = await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["x"] });
  const id = ((await res.json()) as { id: string }).id;
  const local = makeTempDir("o4s-cp-");
  dirs.push(local);
  return { h, id, local, cp: createCpCommand(runtimeFor(h)) };
}

async function usage(run: () => Promise<number>): Promise<string> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error("expected a usage error");
}

describe("openai4s cp", () => {
  test("up into ID:dir/ keeps the name and the mode; down into a directory likewise", async () => {
    const { h, id, local, cp } = await setup();
    writeFileSync(join(local, "in.csv"), "1,2\n");
    const io = captureIo();
    expect(await cp.run(["--mode", "600", join(local, "in.csv"), `${id}:data/`], io)).toBe(0);
    expect(io.out()).toBe(`${id}:data/in.csv (4 bytes, 0600)\n`);
    const onDisk = join(stateLayout(h.dir).workspaceDir(id), "data", "in.csv");
    expect(statSync(onDisk).mode & 0o777).toBe(0o600);

    const into = join(local, "back");
    mkdirSync(into);
    expect(await cp.run([`${id}:data/in.csv`, into], captureIo())).toBe(0);
    expect(readFileSync(join(into, "in.csv"), "utf8")).toBe("1,2\n");
    // Only the file: no temporary left beside it.
    expect(readdirSync(into)).toEqual(["in.csv"]);
  });

  test("a refused or missing remote is exit 1 with the API's reason, nothing written", async () => {
    const { id, local, cp } = await setup();
    const io = captureIo();
    expect(await cp.run([`${id}:nothing-here`, join(local, "x")], io)).toBe(1);
    expect(io.err()).toContain("nothing-here");
    expect(readdirSync(local)).toEqual([]);
  });

  test("usage: two local paths, two workspaces, a bad mode", async () => {
    const { id, cp } = await setup();
    expect(await usage(() => cp.run(["a", "b"], captureIo()))).toContain("exactly one");
    expect(await usage(() => cp.run([`${id}:a`, `${id}:b`], captureIo()))).toContain("exactly one");
    expect(await usage(() => cp.run(["--mode", "4755", "a", `${id}:a`], captureIo()))).toContain(
      "--mode",
    );
    expect(await usage(() => cp.run(["a"], captureIo()))).toContain("SRC and DST");
    expect(await usage(() => cp.run(["--mode", "0777", "a", `${id}:a`], captureIo()))).toContain(
      "world-writable",
    );
  });

  test("a download honours --mode instead of ignoring it", async () => {
    const { id, local, cp } = await setup();
    writeFileSync(join(local, "in.sh"), "echo\n");
    expect(await cp.run([join(local, "in.sh"), `${id}:in.sh`], captureIo())).toBe(0);
    expect(
      await cp.run(["--mode", "0750", `${id}:in.sh`, join(local, "out.sh")], captureIo()),
    ).toBe(0);
    expect(statSync(join(local, "out.sh")).mode & 0o7777).toBe(0o750);
  });
});
