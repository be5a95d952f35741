/**
 * A profile on a partition the cluster does not have, through the BUILT binary on the REAL
 * cluster: the daemon's dry run at start makes it degraded in `openai4s profiles` and
 * GET /v1/profiles, in sbatch's own words for the admin, and without them (the partition
 * named nowhere) for a principal over TCP. Before, the list showed nothing amiss and every
 * submission ended "invalid placement specified: [hidden]". A refused workload keeps sbatch's
 * words for the admin's `openai4s show` too, and the hidden form for its principal's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

/** A name no partition of the test cluster has, and no English word contains. */
const MISSING = "gpuu";
const TOML = [
  "[profiles.small]",
  'description = "one CPU"',
  'partition = "debug"',
  "cpus = 1",
  "memory_mb = 50",
  "time_limit_minutes = 5",
  "allow_batch = true",
  "",
  "[profiles.typo]",
  'description = "one CPU, mistyped"',
  `partition = "${MISSING}"`,
  "cpus = 1",
  "memory_mb = 50",
  "time_limit_minutes = 5",
  "allow_batch = true",
  "",
].join("\n");

interface Degraded {
  readonly reason: string;
  readonly message: string;
  readonly since: string;
  readonly retryAt: string | null;
}
type Listed = { profiles: { name: string; degraded: Degraded | null }[] };

describe.skipIf(testCluster === null)(
  "slurm-cluster binary: a profile the scheduler refuses",
  () => {
    const cluster = testCluster as TestCluster;
    let scratch: string;
    let d: Daemon;
    let tcp: string;

    beforeAll(async () => {
      ensureBuilt();
      scratch = makeTempDir("o4s-profile-refusal-");
      chmodSync(scratch, 0o755);
      const config = join(scratch, "cluster.toml");
      writeFileSync(config, TOML, { mode: 0o644 });
      const port = await freePort();
      tcp = `http://127.0.0.1:${port}`;
      d = await startDaemon({
        args: ["--backend", "slurm", "--cluster-config", config, "--listen", `127.0.0.1:${port}`],
        env: {
          SLURM_CONF: cluster.slurmConf,
          PATH: cluster.path,
          HOME: scratch,
          // A refused submission ends after one back-off (the breaker learning whose fault).
          OPENAI4S_PROFILE_BREAKER_BACKOFF_SECONDS: "1",
        },
        gateway: false,
        startTimeoutMs: 60_000,
      });
    }, 90_000);

    afterAll(async () => {
      await d?.stop();
      if (scratch !== undefined) removeDir(scratch);
    }, 60_000);

    test("the admin reads it degraded in sbatch's words; a principal reads no partition name", async () => {
      // The admin, through the CLI over the socket: the dry run at start lands in a moment.
      const listed = await eventually(
        async () => {
          const r = await d.cli("profiles", "--json");
          const body = JSON.parse(r.stdout) as Listed;
          if (body.profiles.find((p) => p.name === "typo")?.degraded) return body;
          throw new Error(`not yet: ${r.stdout} ${r.stderr}`);
        },
        { what: "the typo profile degraded", timeoutMs: 60_000, intervalMs: 250 },
      );
      const byName = new Map(listed.profiles.map((p) => [p.name, p.degraded]));
      expect(byName.get("small")).toBeNull();
      const typo = byName.get("typo");
      expect(typo?.reason).toBe("SCHEDULER_REFUSES");
      expect(typo?.message).toContain("Invalid partition name specified");
      expect(typo?.retryAt).toBeNull();
      const table = await d.cli("profiles");
      expect(table.stdout).toContain("typo is degraded (SCHEDULER_REFUSES) since ");
      expect(table.stdout).toContain("Invalid partition name specified");

      // A principal over TCP: degraded too, in the hidden form.
      const adminToken = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
      // /metrics says so too (the alerting rule fires on it), for this profile only.
      const metrics = await (
        await fetch(`${tcp}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })
      ).text();
      expect(metrics).toContain('openai4s_profile_scheduler_refuses{profile="typo"} 1');
      expect(metrics).toMatch(/openai4s_profile_scheduler_refuses\{profile="(?!typo)[^"]+"\} 0/);
      const asAdmin = (path: string, body: unknown) =>
        fetch(`${tcp}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      expect((await asAdmin("/v1/principals", { name: "sci" })).status).toBe(201);
      const issued = await asAdmin("/v1/principals/sci/tokens", {});
      expect(issued.status).toBe(201);
      const token = ((await issued.json()) as { token: string }).token;
      const res = await fetch(`${tcp}/v1/profiles`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toMatch(/partition/i);
      expect(text).not.toContain(MISSING);
      const principal = (JSON.parse(text) as Listed).profiles.find((p) => p.name === "typo");
      expect(principal?.degraded?.reason).toBe("SCHEDULER_REFUSES");
      expect(principal?.degraded?.message).toContain("Invalid placement name specified");
      expect(principal?.degraded?.since).toBe(typo?.since ?? "");
    }, 90_000);

    test("a principal's workload on it ends SUBMIT_REJECTED in the hidden form; the admin's show and the log keep sbatch's words", async () => {
      const adminToken = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
      const call = (token: string, method: string, path: string, body?: unknown) =>
        fetch(`${tcp}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      expect((await call(adminToken, "POST", "/v1/principals", { name: "sci2" })).status).toBe(201);
      const issued = await call(adminToken, "POST", "/v1/principals/sci2/tokens", {});
      const token = ((await issued.json()) as { token: string }).token;
      const created = await call(token, "POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "typo",
        command: ["/bin/true"],
      });
      expect(created.status).toBe(201);
      const id = ((await created.json()) as { id: string }).id;
      const ended = await eventually(
        async () => {
          const text = await (await call(token, "GET", `/v1/workloads/${id}`)).text();
          const view = JSON.parse(text) as { phase: string; reason: string; message: string };
          if (view.phase === "FAILED") return { text, view };
          throw new Error(`not yet: ${text}`);
        },
        { what: "the refused workload FAILED", timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(ended.view.reason).toBe("SUBMIT_REJECTED");
      expect(ended.view.message).toContain("invalid placement specified: [hidden]");
      expect(ended.text).not.toMatch(/partition/i);
      expect(ended.text).not.toContain(MISSING);
      const eventsRes = await call(token, "GET", `/v1/workloads/${id}/events`);
      expect(eventsRes.status).toBe(200);
      const events = await eventsRes.text();
      expect(events).toContain("SUBMIT_REJECTED");
      expect(events).not.toMatch(/partition/i);
      expect(events).not.toContain(MISSING);
      // The admin's: the daemon's log at its default level, in sbatch's own words.
      const refused = d
        .log()
        .split("\n")
        .filter((l) => l.includes("the scheduler refused a submission"));
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]).toContain(`invalid partition specified: ${MISSING}`);
      expect(refused[0]).toContain('"level":"warn"');

      // `openai4s show`: the admin's (over the socket) in sbatch's words, the principal's
      // (over TCP with its token) in the hidden form, the partition named nowhere.
      const adminShow = await d.cli("show", id);
      expect(adminShow.code).toBe(0);
      expect(adminShow.stdout).toContain("SUBMIT_REJECTED");
      expect(adminShow.stdout).toContain(`invalid partition specified: ${MISSING}`);
      const tokenFile = join(scratch, "sci2-token");
      writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
      const principalShow = await d.cli("show", id, "--server", tcp, "--token-file", tokenFile);
      expect(principalShow.code).toBe(0);
      expect(principalShow.stdout).toContain("invalid placement specified: [hidden]");
      expect(principalShow.stdout).not.toMatch(/partition/i);
      expect(principalShow.stdout).not.toContain(MISSING);
    }, 60_000);
  },
);
