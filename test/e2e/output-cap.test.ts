/**
 * The admin's per-profile output cap (issue 30), through the built daemon on the local
 * backend: a profiles file sets `max_output_chars = 1000`; a session's cell printing 20,000
 * lines is sent as its first and last 500 characters, and the whole output is in the file
 * the truncation note names, in the session's workspace (written there by the kernel, in
 * the sandbox). Without the key, the kernel's default (200,000) holds.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 60_000;

describe("a profile's max_output_chars", () => {
  let d: Daemon;
  let dir: string;

  beforeAll(async () => {
    ensureBuilt();
    dir = makeTempDir("o4s-output-cap-");
    const profiles = join(dir, "profiles.toml");
    writeFileSync(
      profiles,
      [
        "[profiles.default]",
        'description = "small output cap"',
        "allow_sessions = true",
        "max_output_chars = 1000",
        "",
      ].join("\n"),
    );
    d = await startDaemon({
      env: {
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}`,
        OPENAI4S_LOCAL_PROFILES: profiles,
      },
    });
  }, TIMEOUT_MS);

  afterAll(async () => {
    await d?.stop();
    if (dir) removeDir(dir);
  }, 40_000);

  test(
    "caps what is sent and keeps the whole output in the named workspace file",
    async () => {
      const started = await d.cli("session", "start", "--profile", "default");
      expect(started.code).toBe(0);
      const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
      const ready = await d.cli("wait", id, "--until", "READY", "--timeout", "30s");
      expect(ready.code).toBe(0);
      const r = await d.cli("exec", id, "for i in range(20000):\n    print('line', i)", "--json");
      expect(r.code).toBe(0);
      const output = (JSON.parse(r.stdout) as { output: string }).output;
      const named = /the whole output is in (openai4s-outputs\/\S+-stdout\.txt)\]/.exec(
        output,
      )?.[1];
      expect(named).toBeDefined();
      expect(output).toContain("output over 500 characters");
      expect(output.length).toBeLessThan(2000);
      const workspace = join(`${d.stateDir}-spool`, "workloads", id, "workspace");
      const whole = readFileSync(join(workspace, named ?? "missing"), "utf8");
      expect(whole).toBe(Array.from({ length: 20000 }, (_, i) => `line ${i}\n`).join(""));
      await d.cli("cancel", id);
    },
    TIMEOUT_MS,
  );

  test(
    "a client lowers the cap for one cell, never raises it, and a bad value is a 400 naming it",
    async () => {
      const started = await d.cli("session", "start", "--profile", "default");
      const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
      expect((await d.cli("wait", id, "--until", "READY", "--timeout", "30s")).code).toBe(0);
      const exec = (body: Record<string, unknown>) =>
        fetch(`http://localhost/v1/workloads/${id}/exec`, {
          unix: d.socket,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const code = "for i in range(20000):\n    print('line', i)";
      const workspace = join(`${d.stateDir}-spool`, "workloads", id, "workspace");
      const whole = Array.from({ length: 20000 }, (_, i) => `line ${i}\n`).join("");

      const lowered = (await (await exec({ code, maxOutputChars: 200 })).json()) as {
        output: string;
      };
      expect(lowered.output).toContain("output over 100 characters");
      expect(lowered.output.length).toBeLessThan(800);
      const named = /the whole output is in (openai4s-outputs\/\S+-stdout\.txt)\]/.exec(
        lowered.output,
      )?.[1];
      expect(readFileSync(join(workspace, named ?? "missing"), "utf8")).toBe(whole);

      // Above the profile's 1000: the profile's cap holds.
      const raised = (await (await exec({ code, maxOutputChars: 50_000 })).json()) as {
        output: string;
      };
      expect(raised.output).toContain("output over 500 characters");
      expect(raised.output.length).toBeGreaterThan(1000);
      expect(raised.output.length).toBeLessThan(2000);

      // The next cell without one is back at the profile's cap.
      const next = (await (await exec({ code })).json()) as { output: string };
      expect(next.output).toContain("output over 500 characters");

      for (const bad of [0, -5, 1.5, "100"]) {
        const refused = await exec({ code: "1", maxOutputChars: bad });
        expect(refused.status).toBe(400);
        expect(await refused.text()).toContain("maxOutputChars");
      }
      await d.cli("cancel", id);
    },
    TIMEOUT_MS,
  );
});
