/**
 * Handing an allocation's directories to its identity must never change the owner of what a
 * planted symlink points at: as root, a chown that follows `credentials -> /etc` (or a link
 * swapped in after the check) would give host files to the job's uid.
 */
import { describe, expect, test } from "bun:test";
import { lstatSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { prepareOwnership } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { TEST_RUN_AS } from "../support/run-as.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-ownership-", "each");

/** A root-owned directory and file outside the allocation: what a link would point at. */
function hostTarget(): { readonly dir: string; readonly file: string } {
  const dir = join(tempDir(), "host");
  mkdirSync(dir);
  const file = join(dir, "secret");
  writeFileSync(file, "host", { mode: 0o600 });
  return { dir, file };
}

describe.if(TEST_RUN_AS !== null)("prepareOwnership as root", () => {
  const runAs = TEST_RUN_AS ?? { uid: 65534, gid: 65534, label: "nobody" };

  test("gives the workspace and the credential files to the job's identity", () => {
    const root = tempDir();
    const workspaceDir = join(root, "workspace");
    const credentialDir = join(root, "credentials");
    mkdirSync(workspaceDir);
    mkdirSync(credentialDir);
    writeFileSync(join(credentialDir, "credential"), "c", { mode: 0o600 });
    prepareOwnership(runAs, { spoolDir: root, workspaceDir, credentialDir });
    for (const path of [workspaceDir, credentialDir, join(credentialDir, "credential")]) {
      expect(statSync(path).uid).toBe(runAs.uid);
    }
  });

  test("a symlinked workspace does not hand over its target", () => {
    const target = hostTarget();
    const spoolDir = tempDir();
    const workspaceDir = join(spoolDir, "workspace");
    symlinkSync(target.dir, workspaceDir);
    expect(() =>
      prepareOwnership(runAs, { spoolDir, workspaceDir, credentialDir: null }),
    ).toThrow();
    expect(statSync(target.dir).uid).toBe(0);
  });

  test("a symlinked credential directory is refused, its target and entries untouched", () => {
    const target = hostTarget();
    const root = tempDir();
    const workspaceDir = join(root, "workspace");
    const credentialDir = join(root, "credentials");
    mkdirSync(workspaceDir);
    symlinkSync(target.dir, credentialDir);
    expect(() =>
      prepareOwnership(runAs, { spoolDir: root, workspaceDir, credentialDir }),
    ).toThrow();
    expect(statSync(target.dir).uid).toBe(0);
    expect(statSync(target.file).uid).toBe(0);
  });

  test("a symlink inside the credential directory does not hand over its target", () => {
    const target = hostTarget();
    const root = tempDir();
    const workspaceDir = join(root, "workspace");
    const credentialDir = join(root, "credentials");
    mkdirSync(workspaceDir);
    mkdirSync(credentialDir);
    symlinkSync(target.file, join(credentialDir, "credential"));
    prepareOwnership(runAs, { spoolDir: root, workspaceDir, credentialDir });
    expect(statSync(target.file).uid).toBe(0);
    expect(lstatSync(join(credentialDir, "credential")).isSymbolicLink()).toBe(true);
  });
});
