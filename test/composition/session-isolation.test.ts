/**
 * The directories a sandboxed worker started from source needs: the project, and the
 * install its `node_modules` links to when that is elsewhere (a worktree sharing one
 * install). Without the latter the worker died on "Cannot find package 'valibot'".
 */
import { expect, test } from "bun:test";
import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { selfDirectories } from "../../src/apps/daemon/composition/session-isolation.ts";
import { tempDirs } from "../support/temp-dir.ts";

const dirs = tempDirs("o4s-self-dirs-", "each");

test("from source, a node_modules linked elsewhere is bound as well", () => {
  const root = dirs();
  const project = join(root, "checkout");
  const install = join(root, "shared-install", "node_modules");
  mkdirSync(join(project, "src"), { recursive: true });
  mkdirSync(join(install, "bun", "bin"), { recursive: true });
  symlinkSync(install, join(project, "node_modules"));
  const bun = join(project, "node_modules", "bun", "bin", "bun.exe");
  const bound = selfDirectories([bun, join(project, "src", "main.ts")]);
  expect(bound).toContain(project);
  expect(bound).toContain(install);
});

test("from source, a node_modules inside the project adds nothing beyond the project", () => {
  const project = dirs();
  mkdirSync(join(project, "src"));
  mkdirSync(join(project, "node_modules"));
  const bound = selfDirectories(["/usr/bin/bun", join(project, "src", "main.ts")]);
  expect(bound).toEqual(["/usr/bin", project]);
});
