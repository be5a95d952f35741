/**
 * OPENAI4S_SANDBOX_READONLY: the only way to add a read-only directory to every sandbox (the
 * job's argv never does). Each bad entry is refused at start, naming it.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sandboxReadOnlyDirs } from "../../src/apps/daemon/composition/sandbox-read-only.ts";
import { parseDaemonSettings, SANDBOX_READONLY_ENV } from "../../src/apps/daemon/config.ts";
import { BINARY, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-sandbox-ro-", "each");

/** The variable as the daemon reads it: split at start (config.ts), checked against the layout. */
function parse(value: string | undefined, masked: readonly string[] = []) {
  const parsed = parseDaemonSettings(
    value === undefined ? {} : { [SANDBOX_READONLY_ENV]: value },
    [],
  );
  if (parsed.kind !== "Parsed") throw new Error(JSON.stringify(parsed.errors));
  return sandboxReadOnlyDirs(parsed.settings.sandboxReadOnly, masked);
}

describe(SANDBOX_READONLY_ENV, () => {
  test("unset or empty adds nothing", () => {
    expect(parse(undefined)).toEqual({ kind: "Dirs", dirs: [] });
    expect(parse("")).toEqual({ kind: "Dirs", dirs: [] });
  });

  test("existing absolute directories are taken, once each", () => {
    const a = join(tempDir(), "a");
    const b = join(tempDir(), "b");
    mkdirSync(a);
    mkdirSync(b);
    expect(parse(`${a}:${b}::${a}`)).toEqual({ kind: "Dirs", dirs: [a, b] });
  });

  test("each bad entry is refused, naming it", () => {
    const root = tempDir();
    const file = join(root, "file");
    writeFileSync(file, "");
    const spool = join(root, "spool");
    mkdirSync(join(spool, "tools"), { recursive: true });
    const cases: readonly [string, string][] = [
      ["relative/dir", "not an absolute path"],
      ["/etc", "under the host's /etc"],
      ["/proc/1/root", "under the host's /proc"],
      ["/sys", "under the host's /sys"],
      ["/dev/shm", "under the host's /dev"],
      ["/", "the root directory"],
      [`${root}/../x`, "not a normalized path"],
      [join(root, "missing"), "cannot be read"],
      [file, "is not a directory"],
      [join(spool, "tools"), `is below ${spool}`],
    ];
    for (const [dir, why] of cases) {
      const result = parse(`${root}:${dir}`, [spool]);
      expect(result.kind).toBe("ConfigError");
      if (result.kind !== "ConfigError") continue;
      expect(result.message).toContain(`${SANDBOX_READONLY_ENV}: ${JSON.stringify(dir)}`);
      expect(result.message).toContain(why);
    }
  });

  test("the daemon refuses to start with a bad entry (exit 2, naming it)", () => {
    ensureBuilt();
    const state = join(tempDir(), "state");
    const r = Bun.spawnSync([BINARY, "serve", "--state-dir", state], {
      env: { PATH: "/usr/bin:/bin", HOME: tempDir(), [SANDBOX_READONLY_ENV]: "/etc" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(r.exitCode).toBe(2);
    expect(r.stderr.toString()).toContain(`${SANDBOX_READONLY_ENV}: "/etc"`);
  });

  test.if(process.getuid?.() === 0)(
    "a program in a listed directory runs in a sandboxed job",
    async () => {
      const tools = join(tempDir(), "tools");
      mkdirSync(tools, { mode: 0o755 });
      chmodSync(tools, 0o755);
      writeFileSync(join(tools, "tool"), "#!/bin/sh\necho from-the-admins-tools\n");
      chmodSync(join(tools, "tool"), 0o755);
      const d = await startDaemon({
        env: { PATH: "/usr/local/bin:/usr/bin:/bin", [SANDBOX_READONLY_ENV]: tools },
      });
      try {
        const r = await d.cli("submit", "--", join(tools, "tool"));
        const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
        await d.cli("wait", id, "--timeout", "45s");
        const view = await d.show(id);
        const allocation = view.allocations[0]?.id ?? "none";
        const logs = join(`${d.stateDir}-spool`, "workloads", id, "allocations", allocation);
        expect(view.phase).toBe("COMPLETED");
        expect(readFileSync(join(logs, "stdout.log"), "utf8")).toBe("from-the-admins-tools\n");
      } finally {
        await d.stop();
      }
    },
    60_000,
  );
});
