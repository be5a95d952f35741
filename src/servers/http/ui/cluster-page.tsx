/** @jsxImportSource hono/jsx */
/**
 * The cluster as the daemon sees it: is the backend answering (and since when), how hard
 * the reconciler is driving the scheduler, jobs nobody owns, whether sessions may be placed,
 * and what each profile is doing now.
 */

import type { LiveProfileCount } from "../../../adapters/store-sqlite/index.ts";
import type { ResourceProfile } from "../../../core/models.ts";
import type {
  BackendDiagnostics,
  IsolationVerdict,
} from "../../../core/ports/allocation-backend.ts";
import type { TickFigures } from "../deps.ts";
import type { DegradedProfileView, PlacementView } from "../profiles/profile-view.ts";
import { CallRateChart } from "./call-rate-chart.tsx";
import type { CallRatePoint } from "./call-rate-history.ts";
import { ago, duration, utc } from "./format.ts";
import { Layout } from "./layout.tsx";

export interface ClusterPageProps {
  readonly nonce: string;
  readonly logoutCsrf: string | undefined;
  readonly nowMs: number;
  readonly backend: BackendDiagnostics;
  readonly healthy: boolean;
  readonly healthMessage: string;
  /** When this daemon's pages first saw the backend in its present health. */
  readonly healthSinceMs: number;
  readonly callsPerSecond: number;
  readonly callTotals: Readonly<Record<string, number>>;
  readonly lastTick: TickFigures | null;
  readonly isolation: IsolationVerdict | null;
  /** When these pages first saw the verdict they show (the verifier keeps no time). */
  readonly isolationSinceMs: number;
  /** Null: this daemon records no history (the chart says so). */
  readonly callHistory: {
    readonly points: readonly CallRatePoint[];
    readonly sinceMs: number | null;
  } | null;
  readonly profiles: readonly {
    readonly profile: ResourceProfile;
    readonly placement: Readonly<Partial<Record<string, PlacementView>>>;
    /** Why no job of it can be placed (the scheduler's words); null when it can. */
    readonly degraded: DegradedProfileView | null;
  }[];
  readonly live: readonly LiveProfileCount[];
}

function Card(props: { readonly label: string; readonly value: string; readonly tone?: string }) {
  return (
    <div class="card">
      <div class="label">{props.label}</div>
      <div class={`value ${props.tone ?? ""}`}>{props.value}</div>
    </div>
  );
}

function liveUse(live: readonly LiveProfileCount[], profile: string): string {
  const mine = live.filter((l) => l.profile === profile && l.count > 0);
  if (mine.length === 0) return "idle";
  return mine.map((l) => `${l.count} ${l.phase}`).join(", ");
}

function resources(p: ResourceProfile): string {
  const r = p.resources;
  const parts = [`${r.nodes} node${r.nodes === 1 ? "" : "s"}`, `${r.cpus} CPU`];
  if (r.gpus > 0) parts.push(`${r.gpus} GPU`);
  if (r.memoryMb !== null) parts.push(`${Math.round(r.memoryMb / 1024)} GiB`);
  if (r.timeLimitSeconds !== null) parts.push(`limit ${duration(r.timeLimitSeconds * 1000)}`);
  return parts.join(" · ");
}

export function ClusterPage(props: ClusterPageProps) {
  const orphans = props.backend.orphans ?? null;
  const { nowMs } = props;
  const isolation = props.isolation;
  return (
    <Layout title="Cluster" section="cluster" nonce={props.nonce} logoutCsrf={props.logoutCsrf}>
      <h1>Cluster · backend {props.backend.backend}</h1>
      <div class="cards">
        <Card
          label="Backend"
          value={props.healthy ? "healthy" : "DEGRADED"}
          tone={props.healthy ? "ok" : "bad"}
        />
        <Card label="In this state since" value={ago(props.healthSinceMs, nowMs)} />
        <Card label="Scheduler calls/s (last min)" value={props.callsPerSecond.toFixed(2)} />
        <Card
          label="Orphan jobs"
          value={orphans === null ? "not swept" : String(orphans.jobs.length)}
          tone={orphans === null ? "muted" : orphans.jobs.length > 0 ? "bad" : "ok"}
        />
        <Card
          label="Session isolation"
          value={
            isolation === null
              ? "no session profiles"
              : isolation.kind === "Verified"
                ? "verified"
                : "UNVERIFIED"
          }
          tone={isolation === null ? "muted" : isolation.kind === "Verified" ? "ok" : "bad"}
        />
      </div>
      <p>
        {props.healthMessage}{" "}
        <span class="muted">
          (health since: first seen in this state by these pages at {utc(props.healthSinceMs)})
        </span>
      </p>
      <div class="row">
        <section>
          <h2>Scheduler load</h2>
          {props.callHistory === null ? (
            <p class="muted">
              This daemon records no call history; the figure above covers the last minute.
            </p>
          ) : props.callHistory.points.length < 2 ? (
            <p class="muted">
              Calls per second over the last hour: collecting since{" "}
              {props.callHistory.sinceMs === null ? "now" : utc(props.callHistory.sinceMs)} (one
              sample each 30 s; the chart appears with the second).
            </p>
          ) : (
            <CallRateChart points={props.callHistory.points} nowMs={nowMs} />
          )}
          <p class="muted">Calls by operation since the daemon started:</p>
          <table>
            <thead>
              <tr>
                <th scope="col">Operation</th>
                <th scope="col">Calls</th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(props.callTotals).map(([op, n]) => (
                <tr>
                  <td class="mono">{op}</td>
                  <td>{n}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">
            {props.lastTick === null
              ? "The reconciler has not finished a tick yet."
              : `Last reconciler tick ${ago(props.lastTick.startedAt, nowMs)}: ${props.lastTick.durationMs.toFixed(1)} ms, ${props.lastTick.backendCallsTotal} backend calls${props.lastTick.error ? `, failed: ${props.lastTick.error}` : ""}.`}
          </p>
        </section>
        <section>
          <h2>Session isolation</h2>
          <p>
            {isolation === null
              ? "No profile accepts sessions."
              : isolation.kind === "Verified"
                ? `Verified: ${isolation.mechanism}.`
                : `Unverified: ${isolation.message}. Sessions are refused until it is verified.`}{" "}
            <span class="muted">
              This verdict since {utc(props.isolationSinceMs)} ({ago(props.isolationSinceMs, nowMs)}
              , as first seen by these pages).
            </span>
          </p>
          <h2>Orphans</h2>
          {orphans === null ? (
            <p class="muted">This backend does not sweep for orphans.</p>
          ) : (
            <>
              <p class="muted">
                Policy {orphans.policy}; last sweep{" "}
                {orphans.lastSweepAt === null ? "never answered" : ago(orphans.lastSweepAt, nowMs)}
                {orphans.error ? `; last error: ${orphans.error}` : ""}.
              </p>
              {orphans.jobs.length === 0 ? (
                <p class="ok">No orphan jobs.</p>
              ) : (
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Backend job</th>
                      <th scope="col">State</th>
                      <th scope="col">Action</th>
                    </tr>
                  </thead>
                  <tbody>
                    {orphans.jobs.map((j) => (
                      <tr>
                        <td class="mono">{j.handle}</td>
                        <td>{j.state}</td>
                        <td>{j.action}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </>
          )}
        </section>
      </div>
      <h2>Profiles</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Profile</th>
            <th scope="col">Resources</th>
            <th scope="col">Placement now</th>
            <th scope="col">Live use</th>
          </tr>
        </thead>
        <tbody>
          {props.profiles.map(({ profile, placement, degraded }) => (
            <tr>
              <td>
                <strong>{profile.name}</strong>
                <div class="muted">{profile.description}</div>
              </td>
              <td>{resources(profile)}</td>
              <td>
                {Object.entries(placement).map(([kind, p]) => (
                  <div class={p?.placeable ? "ok" : "bad"}>
                    {kind}: {p?.placeable ? "placeable" : `refused (${p?.reason ?? "?"})`}
                  </div>
                ))}
                {degraded === null ? null : (
                  <div class="bad">
                    degraded ({degraded.reason}) since {degraded.since}: {degraded.message}
                  </div>
                )}
              </td>
              <td>
                <a href={`/ui/workloads?profile=${encodeURIComponent(profile.name)}`}>
                  {liveUse(props.live, profile.name)}
                </a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Layout>
  );
}
