/**
 * An account that only an NSS source other than the files knows (issue 32): at an HPC site
 * the scientists are in LDAP or SSSD, and /etc/passwd never names them. Here that source is
 * libnss-extrausers (/var/lib/extrausers/{passwd,group}), where this machine's
 * nsswitch.conf names it after `files` (root only; `extrausersConfigured()` says whether).
 * `remove()` takes the account's lines out again.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { OwnerAccount } from "./owner-account.ts";

const EXTRA_DIR = "/var/lib/extrausers";

/** Whether NSS here asks libnss-extrausers for passwd and group (and this is root). */
export function extrausersConfigured(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    const conf = readFileSync("/etc/nsswitch.conf", "utf8");
    return ["passwd", "group"].every((db) =>
      new RegExp(`^${db}:.*\\bextrausers\\b`, "m").test(conf),
    );
  } catch {
    return false;
  }
}

function read(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** Replaces the file whole (a reader never sees half of it), world-readable as NSS needs. */
function write(path: string, text: string): void {
  const temp = `${path}.o4s-${randomBytes(4).toString("hex")}`;
  writeFileSync(temp, text, { mode: 0o644 });
  renameSync(temp, path);
}

/** A uid (and gid) no account or group holds now, as NSS answers. */
function freshId(): number {
  for (;;) {
    const id = 50_000 + (randomBytes(2).readUInt16BE(0) % 10_000);
    const taken = (db: string) => Bun.spawnSync({ cmd: ["getent", db, String(id)] }).exitCode === 0;
    if (!taken("passwd") && !taken("group")) return id;
  }
}

export function createExtrausersAccount(): OwnerAccount {
  const suffix = randomBytes(3).toString("hex");
  const user = `o4sldap${suffix}`;
  const lab = `o4sldaplab${suffix}`;
  const id = freshId();
  let labGid = freshId();
  while (labGid === id) labGid = freshId();
  const files = { passwd: join(EXTRA_DIR, "passwd"), group: join(EXTRA_DIR, "group") };
  const lines = {
    passwd: `${user}:x:${id}:${id}::/nonexistent:/bin/sh\n`,
    group: `${user}:x:${id}:\n${lab}:x:${labGid}:${user}\n`,
  };
  for (const db of ["passwd", "group"] as const) write(files[db], read(files[db]) + lines[db]);
  return {
    user,
    uid: id,
    gid: id,
    labGid,
    remove() {
      for (const db of ["passwd", "group"] as const) {
        write(files[db], read(files[db]).split(lines[db]).join(""));
      }
    },
  };
}
