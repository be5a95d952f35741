/**
 * The repository stands alone: no tracked file names a developer machine's paths, the
 * README and docs link only to files that exist in the repository, a LICENSE matches the
 * package's license field (the shipped systemd unit is checked in test/deploy/systemd-unit.test.ts).
 */

import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { systemAccounts } from "../../src/adapters/accounts-nss/getent-accounts.ts";
import { parseServeArgs } from "../../src/apps/daemon/serve-flags.ts";
import { systemClock } from "../../src/lib/clock.ts";
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

describe("docs/operations.md: an admin's first hour has no trap", () => {
  const ops = readFileSync(join(ROOT, "docs", "operations.md"), "utf8");
  const unit = readFileSync(join(ROOT, "deploy", "openai4s.service"), "utf8");

  test("one story for who the daemon runs as: one table, and the unit, README and example point at it", () => {
    // Three files used to disagree: "root (default, strongest)", "never root", and run_as =
    // "owner" needing root; an admin settled it by reading all three.
    const section = ops.slice(ops.indexOf("## Who the daemon runs as"));
    expect(section).toContain("| | dedicated account (the shipped unit) | root |");
    expect(section).toContain('| `run_as = "owner"` profiles | refused at start (exit 2) |');
    expect(ops).not.toContain("(default, strongest)");
    expect(unit).toContain('docs/operations.md ("Who the daemon runs as")');
    expect(unit).toMatch(/^User=openai4s$/m);
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme).toContain("(docs/operations.md#who-the-daemon-runs-as)");
    const example = readFileSync(join(ROOT, "cluster.toml.example"), "utf8");
    expect(example).toContain('"Who the daemon runs as"');
  });

  test("the unit offers the TCP listener, with TLS, in flags serve really takes", () => {
    const line = /^#(ExecStart=\/usr\/local\/bin\/openai4s serve .*--listen .*)$/m.exec(unit)?.[1];
    expect(line).toBeDefined();
    const args = (line ?? "").split(" ").slice(2);
    const env = { OPENAI4S_STATE_DIR: "/var/lib/openai4s" };
    const parsed = parseServeArgs(args, env, "/", "/", 941, systemAccounts(systemClock));
    expect(parsed).toMatchObject({
      listen: [{ kind: "unix" }, { kind: "tcp", port: 8470 }],
      listenTls: { certPath: "/etc/openai4s/api-cert.pem", keyPath: "/etc/openai4s/api-key.pem" },
    });
    expect(ops).toContain("`--tls-cert FILE --tls-key FILE`");
  });

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
