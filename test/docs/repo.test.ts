/**
 * The repository stands alone: no tracked file names a developer machine's paths, the
 * README and docs link only to files that exist in the repository, a LICENSE matches the
 * package's license field, and the shipped systemd unit passes `systemd-analyze verify`
 * (with no warning: it exits 0 on unknown keys and bad values, so its output must be empty).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { tempDir } from "../support/temp-dir.ts";
import { REPO_ROOT, trackedFiles } from "../support/tracked-files.ts";

const ROOT = REPO_ROOT;
const tracked = trackedFiles;

/** Paths of the machines this was developed on, and the shared notes outside the repo. */
const FOREIGN = [/\/work\//, /(?<!\/\$bunfs)\/root\//, /\.\.\/shared\b/];

describe("repository hygiene", () => {
  test("no tracked file names a developer machine's absolute path or the shared notes", () => {
    const offenders: string[] = [];
    for (const file of tracked()) {
      if (file === "package-lock.json" || file === "LICENSE") continue;
      const path = join(ROOT, file);
      if (!existsSync(path)) continue;
      const text = readFileSync(path, "utf8");
      text.split("\n").forEach((line, i) => {
        if (FOREIGN.some((re) => re.test(line))) offenders.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(offenders).toEqual([]);
  });

  test("README and docs link only to files that exist in the repository", () => {
    const docs = tracked().filter((f) => f === "README.md" || /^docs\/.*\.md$/.test(f));
    expect(docs).toContain("docs/operations.md");
    const broken: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(join(ROOT, doc), "utf8");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (target === undefined || /^(https?:|mailto:|#)/.test(target)) continue;
        const file = resolve(ROOT, dirname(doc), target.split("#")[0] ?? "");
        if (!file.startsWith(`${ROOT}/`) || !existsSync(file)) broken.push(`${doc}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  test("a LICENSE file matching the package's license field", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { license: string };
    expect(pkg.license).toBe("Apache-2.0");
    expect(readFileSync(join(ROOT, "LICENSE"), "utf8")).toContain("Apache License");
  });
});

const analyze = Bun.which("systemd-analyze");

describe.skipIf(analyze === null)("deploy/openai4s.service", () => {
  test("systemd-analyze verify accepts it without a warning", () => {
    using scratch = tempDir("o4s-unit-");
    const dir = scratch.path;
    // verify also checks that ExecStart's program exists: point it at the launcher.
    const unit = readFileSync(join(ROOT, "deploy", "openai4s.service"), "utf8");
    expect(unit).toContain("ExecStart=/usr/local/bin/openai4s serve");
    const path = join(dir, "openai4s.service");
    writeFileSync(path, unit.replace("/usr/local/bin/openai4s", join(ROOT, "bin", "openai4s.mjs")));
    const run = Bun.spawnSync([analyze as string, "verify", path], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const output = `${run.stdout.toString()}${run.stderr.toString()}`.trim();
    expect({ exitCode: run.exitCode, output }).toEqual({ exitCode: 0, output: "" });
  });
});

describe("docs/operations.md: an admin's first hour has no trap", () => {
  const ops = readFileSync(join(ROOT, "docs", "operations.md"), "utf8");
  const unit = readFileSync(join(ROOT, "deploy", "openai4s.service"), "utf8");

  test("the unit stops the daemon only, as the docs promise local jobs keep running", () => {
    // systemd's default KillMode (control-group) kills every local job with the daemon.
    expect(ops).toContain("Jobs keep running");
    expect(unit).toMatch(/^KillMode=process$/m);
  });

  test("the account is created with a pinned uid and gid, the same on every node", () => {
    const useradd = ops.split("\n").find((l) => l.startsWith("useradd "));
    expect(useradd).toMatch(/--uid [0-9]+ --gid [0-9]+ /);
    expect(ops).toMatch(/^groupadd --system --gid [0-9]+ openai4s$/m);
  });

  test("the upgrade replaces the binary with a command that works while it runs", () => {
    const upgrade = ops.slice(ops.indexOf("## Upgrade and migrations"));
    // `cp` onto a running executable fails with "Text file busy".
    expect(upgrade).toContain("install -m 0755 dist/openai4s /usr/local/bin/openai4s");
    expect(upgrade).not.toMatch(/^\s*cp [^\n]*\/usr\/local\/bin\/openai4s\s*$/m);
  });

  test("data in and out: no advice to hand a job a secret as a host file path", () => {
    expect(ops).toContain("## Getting data in and out");
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme).not.toContain("a secret travels as a path to a 0600 file");
  });
});
