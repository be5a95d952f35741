/**
 * Files in and out through the built binary's daemon (local backend): `openai4s cp` uploads
 * a secret-mode input a job then reads as its own leased uid and writes a result that `cp`
 * brings back; and a 1 GB file goes in and out with the daemon's peak RSS (VmHWM) growing
 * by less than 64 MB, the whole file never being held in memory.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { closeSync, openSync, readFileSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";

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

function statusKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${field}:`));
  return Number(line?.split(/\s+/)[1] ?? Number.NaN);
}

async function submit(d: Daemon, ...command: string[]): Promise<string> {
  const r = await d.cli("submit", "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}\n${d.log()}`);
  return r.stdout.trim().split(/\s+/).at(-1) ?? "";
}

describe("files through the binary (local backend)", () => {
  test("an input uploaded 0600 is read by the job; its output comes back", async () => {
    const d = await up();
    // The job waits for its input: the upload happens before it could have read anything.
    const id = await submit(
      d,
      "/bin/sh",
      "-c",
      "while [ ! -f in/secret ]; do sleep 0.05; done; tr a-z A-Z < in/secret > out.txt; stat -c %a in/secret > mode.txt",
    );
    const local = join(d.dir, "secret");
    writeFileSync(local, "hush\n", { mode: 0o600 });
    const put = await d.cli("cp", "--mode", "0600", local, `${id}:in/secret`);
    expect({ code: put.code, err: put.stderr }).toEqual({ code: 0, err: "" });
    const waited = await d.cli("wait", id, "--timeout", "60s");
    expect({
      code: waited.code,
      out: waited.stdout,
      log: waited.code === 0 ? "" : d.log(),
    }).toMatchObject({ code: 0 });
    const back = join(d.dir, "out.txt");
    const get = await d.cli("cp", `${id}:out.txt`, back);
    expect({ code: get.code, err: get.stderr }).toEqual({ code: 0, err: "" });
    expect(readFileSync(back, "utf8")).toBe("HUSH\n");
    const mode = await d.cli("cp", `${id}:mode.txt`, `${d.dir}/`);
    expect(mode.code).toBe(0);
    expect(readFileSync(join(d.dir, "mode.txt"), "utf8").trim()).toBe("600");
  }, 120_000);

  test("1 GB in and out: the daemon's peak RSS grows by less than 64 MB", async () => {
    const d = await up();
    const id = await submit(d, "/bin/true");
    const big = join(d.dir, "big.bin");
    const block = crypto.getRandomValues(new Uint8Array(1024 * 1024));
    const fd = openSync(big, "w");
    for (let i = 0; i < 1024; i++) {
      block[0] = i & 0xff;
      block[1] = i >> 8;
      writeSync(fd, block);
    }
    closeSync(fd);
    const pid = d.proc.pid;
    const before = statusKb(pid, "VmRSS");
    const put = await d.cli("cp", big, `${id}:big.bin`);
    expect({ code: put.code, err: put.stderr }).toEqual({ code: 0, err: "" });
    const back = join(d.dir, "back.bin");
    const get = await d.cli("cp", `${id}:big.bin`, back);
    expect({ code: get.code, err: get.stderr }).toEqual({ code: 0, err: "" });
    const growthMb = (statusKb(pid, "VmHWM") - before) / 1024;
    console.log(
      `daemon RSS before ${Math.round(before / 1024)} MB, peak growth ${growthMb.toFixed(1)} MB`,
    );
    expect(growthMb).toBeLessThan(64);
    expect(statSync(back).size).toBe(1024 ** 3);
    const cmp = Bun.spawnSync(["cmp", big, back]);
    expect(cmp.exitCode).toBe(0);
  }, 300_000);
});
