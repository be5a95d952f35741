/** @jsxImportSource hono/jsx */
/** Sessions and their clocks: how long idle, how long held, against which limits. */

import type { UnreadableWorkload, WorkloadDetails } from "../../../adapters/store-sqlite/index.ts";
import { isTerminal, type Workload } from "../../../core/models.ts";
import { ago, duration } from "./format.ts";
import { Layout, PhaseBadge } from "./layout.tsx";

export interface SessionsPageProps {
  readonly nonce: string;
  readonly logoutCsrf: string | undefined;
  readonly sessions: readonly WorkloadDetails[];
  /** Sessions whose stored record does not decode: named, not dropped (issue 34). */
  readonly unreadable: readonly UnreadableWorkload[];
  readonly nowMs: number;
}

function limit(seconds: number | undefined): string {
  return seconds === undefined ? "daemon default" : duration(seconds * 1000);
}

function Row(props: { readonly d: WorkloadDetails; readonly nowMs: number }) {
  const w: Workload = props.d.workload;
  const { nowMs } = props;
  const current = props.d.allocations.find((a) => a.epoch === w.executionEpoch);
  const startedAt = current?.startedAt ?? null;
  const live = !isTerminal(w.phase);
  const idleFrom = w.lastActiveAt ?? startedAt;
  return (
    <tr>
      <td class="mono">
        <a href={`/ui/workloads/${encodeURIComponent(w.id)}`}>{w.id}</a>
      </td>
      <td>{w.name}</td>
      <td>{w.profile}</td>
      <td>
        <PhaseBadge phase={w.phase} />
        {w.reason ? <div class="muted">{w.reason}</div> : null}
      </td>
      <td>{w.lastActiveAt === null ? "never" : ago(w.lastActiveAt, nowMs)}</td>
      <td>
        {live && idleFrom !== null ? duration(nowMs - idleFrom) : "—"}
        <div class="muted">of {limit(w.spec.idleTimeoutSeconds)}</div>
      </td>
      <td>
        {startedAt === null ? "not started" : duration((current?.endedAt ?? nowMs) - startedAt)}
        <div class="muted">of {limit(w.spec.maxLifetimeSeconds)}</div>
      </td>
    </tr>
  );
}

export function SessionsPage(props: SessionsPageProps) {
  const live = props.sessions.filter((d) => !isTerminal(d.workload.phase));
  const ended = props.sessions.filter((d) => isTerminal(d.workload.phase));
  const table = (rows: readonly WorkloadDetails[], empty: string) => (
    <table>
      <thead>
        <tr>
          <th scope="col">ID</th>
          <th scope="col">Name</th>
          <th scope="col">Profile</th>
          <th scope="col">Phase</th>
          <th scope="col">Last activity</th>
          <th scope="col">Idle for</th>
          <th scope="col">Held for</th>
        </tr>
      </thead>
      <tbody>
        {rows.length === 0 ? (
          <tr>
            <td colspan={7} class="muted">
              {empty}
            </td>
          </tr>
        ) : (
          rows.map((d) => <Row d={d} nowMs={props.nowMs} />)
        )}
      </tbody>
    </table>
  );
  return (
    <Layout title="Sessions" section="sessions" nonce={props.nonce} logoutCsrf={props.logoutCsrf}>
      <h1>Sessions</h1>
      <h2>Live ({live.length})</h2>
      {table(live, "No live session.")}
      <h2>Recently ended</h2>
      {table(ended, "No ended session among the latest.")}
      {props.unreadable.length === 0 ? null : (
        <>
          <h2>Unreadable ({props.unreadable.length})</h2>
          <ul>
            {props.unreadable.map((u) => (
              <li>
                <span class="mono">{u.id}</span>: its stored record cannot be read: {u.message}
              </li>
            ))}
          </ul>
        </>
      )}
    </Layout>
  );
}
