/**
 * A throwaway unix account for run-as-owner tests (root only): `useradd` with its own group
 * plus one supplementary "lab" group, and the principal that is that account, with a token.
 * `remove()` deletes both accounts; the daemon is the caller's to stop first.
 */
import { randomBytes } from "node:crypto";

export interface OwnerAccount {
  readonly user: string;
  readonly uid: number;
  readonly gid: number;
  /** The supplementary group the account is in. */
  readonly labGid: number;
  /** Deletes the account and its groups (a process of it still ending does not stop that). */
  remove(): void;
}

export function run(cmd: readonly string[], env: Record<string, string> = {}): string {
  const done = Bun.spawnSync({ cmd: [...cmd], env: { ...process.env, ...env }, stderr: "pipe" });
  if (done.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${done.stderr.toString()}`);
  return done.stdout.toString();
}

/** A uid (and gid) no account or group holds now, from a wide range. */
function freshId(): number {
  for (;;) {
    const id = 30_000 + (randomBytes(2).readUInt16BE(0) % 20_000);
    const taken = (db: string) => Bun.spawnSync({ cmd: ["getent", db, String(id)] }).exitCode === 0;
    if (!taken("passwd") && !taken("group")) return id;
  }
}

/**
 * The ids are fresh ones from a wide range, not useradd's next free uid: Slurm caches a
 * uid's groups, and a uid an earlier test's account had (useradd hands the same one out
 * again after userdel) was seen with that account's groups, not this one's.
 */
export function createOwnerAccount(): OwnerAccount {
  const suffix = randomBytes(3).toString("hex");
  const user = `o4sown${suffix}`;
  const lab = `o4slab${suffix}`;
  const id = String(freshId());
  run(["groupadd", "-g", id, user]);
  run(["useradd", "-M", "-d", "/nonexistent", "-s", "/bin/sh", "-u", id, "-g", id, user]);
  try {
    run(["groupadd", "-g", String(freshId()), lab]);
    run(["usermod", "-a", "-G", lab, user]);
  } catch (error) {
    Bun.spawnSync({ cmd: ["userdel", user], stderr: "pipe" });
    Bun.spawnSync({ cmd: ["groupdel", user], stderr: "pipe" });
    throw error;
  }
  return {
    user,
    uid: Number(run(["id", "-u", user]).trim()),
    gid: Number(run(["id", "-g", user]).trim()),
    labGid: Number(run(["getent", "group", lab]).split(":")[2]),
    remove() {
      // -f: a job's process the scheduler is still ending must not keep the account around.
      Bun.spawnSync({ cmd: ["userdel", "-f", user], stderr: "pipe" });
      Bun.spawnSync({ cmd: ["groupdel", user], stderr: "pipe" });
      Bun.spawnSync({ cmd: ["groupdel", lab], stderr: "pipe" });
    },
  };
}

/** Adds principal `name` as `unixUser` through the admin API and returns a token of its. */
export async function principalToken(
  base: string,
  adminToken: string,
  name: string,
  unixUser: string,
): Promise<string> {
  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const added = await post("/v1/principals", { name, unixUser });
  if (added.status !== 201) throw new Error(`principal add: ${await added.text()}`);
  const issued = await post(`/v1/principals/${name}/tokens`, {});
  if (issued.status !== 201) throw new Error(`token issue: ${await issued.text()}`);
  return String(((await issued.json()) as { token: string }).token);
}
