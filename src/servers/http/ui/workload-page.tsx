/** @jsxImportSource hono/jsx */
/** One workload: where it is, why, what to do, how it got there, and its output live. */

import type { WorkloadDetails } from "../../../adapters/store-sqlite/index.ts";
import { isTerminal, type TransitionEvent } from "../../../core/models.ts";
import { stableWorkloadView } from "../views.ts";
import { ago, duration, utc } from "./format.ts";
import { Layout, PhaseBadge } from "./layout.tsx";
import { LOG_TAIL_SCRIPT } from "./log-tail-script.ts";

export interface WorkloadPageProps {
  readonly nonce: string;
  readonly csrf: string;
  readonly logoutCsrf: string | undefined;
  readonly details: WorkloadDetails;
  readonly events: readonly TransitionEvent[];
  /** Which of the latest attempt's outputs the tail follows. */
  readonly stream: "stdout" | "stderr";
  readonly nowMs: number;
}

function Card(props: { readonly label: string; readonly children?: unknown }) {
  return (
    <div class="card">
      <div class="label">{props.label}</div>
      <div class="value">{props.children as string}</div>
    </div>
  );
}

function maybeTime(ms: number | null, nowMs: number): string {
  return ms === null ? "—" : `${utc(ms)} (${ago(ms, nowMs)})`;
}

export function WorkloadPage(props: WorkloadPageProps) {
  const { workload: w, allocations } = props.details;
  const view = stableWorkloadView(w, props.details.conditions, allocations);
  const { nowMs } = props;
  const id = encodeURIComponent(w.id);
  return (
    <Layout
      title={w.name || w.id}
      section="workloads"
      nonce={props.nonce}
      logoutCsrf={props.logoutCsrf}
    >
      <h1>
        {w.name} <span class="muted mono">{w.id}</span> <PhaseBadge phase={w.phase} />
      </h1>
      <div class="cards">
        <Card label="Kind · profile">{`${w.kind} · ${w.profile}`}</Card>
        <Card label="Reason">{w.reason ?? "—"}</Card>
        <Card label="Created">{ago(w.createdAt, nowMs)}</Card>
        <Card label="Attempt">{`${w.executionEpoch} of ${Math.max(w.maxAttempts, w.executionEpoch)}`}</Card>
        <Card label="Exit code">{w.exitCode === null ? "—" : String(w.exitCode)}</Card>
      </div>
      {w.message ? <p>{w.message}</p> : null}
      {view.hint ? (
        <p class="hint">
          <strong>What to do: </strong>
          {view.hint}
        </p>
      ) : null}
      {isTerminal(w.phase) || w.desired.kind === "STOP" ? (
        w.desired.kind === "STOP" && !isTerminal(w.phase) ? (
          <p class="warn">Stop requested: {w.desired.message}</p>
        ) : null
      ) : (
        <form method="post" action={`/ui/workloads/${id}/cancel`}>
          <input type="hidden" name="csrf" value={props.csrf} />
          <button class="danger" type="submit">
            Cancel workload
          </button>
        </form>
      )}
      <div class="row">
        <section>
          <h2>Conditions</h2>
          <table>
            <thead>
              <tr>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
                <th scope="col">Reason</th>
                <th scope="col">Since</th>
              </tr>
            </thead>
            <tbody>
              {view.conditions.map((c) => (
                <tr>
                  <td>{c.type}</td>
                  <td class={c.status === "TRUE" ? "ok" : c.status === "FALSE" ? "bad" : "muted"}>
                    {c.status}
                  </td>
                  <td>
                    {c.reason}
                    <div class="muted">{c.message}</div>
                  </td>
                  <td>{c.lastTransitionTime.slice(0, 19).replace("T", " ")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
        <section>
          <h2>Attempts</h2>
          <table>
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Backend job</th>
                <th scope="col">Phase</th>
                <th scope="col">Queued for</th>
                <th scope="col">Ran for</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {allocations.length === 0 ? (
                <tr>
                  <td colspan={6} class="muted">
                    No attempt yet.
                  </td>
                </tr>
              ) : (
                allocations.map((a) => (
                  <tr>
                    <td>{a.epoch}</td>
                    <td class="mono">{a.handle ?? "—"}</td>
                    <td>
                      <PhaseBadge phase={a.phase} />
                    </td>
                    <td>
                      {a.submittedAt === null
                        ? "—"
                        : duration((a.startedAt ?? a.endedAt ?? nowMs) - a.submittedAt)}
                    </td>
                    <td>
                      {a.startedAt === null ? "—" : duration((a.endedAt ?? nowMs) - a.startedAt)}
                    </td>
                    <td>{a.reason ?? ""}</td>
                  </tr>
                ))
              )}
            </tbody>
          </table>
        </section>
      </div>
      <h2>Output · {props.stream}</h2>
      <nav class="pager" aria-label="Output stream">
        {(["stdout", "stderr"] as const).map((s) => (
          <a
            href={`/ui/workloads/${id}${s === "stdout" ? "" : "?log=stderr"}`}
            aria-current={s === props.stream ? "page" : undefined}
          >
            {s}
          </a>
        ))}
      </nav>
      <p id="log-status" class="muted" aria-live="polite">
        Loading…
      </p>
      <pre
        role="log"
        id="log"
        class="log"
        tabindex={0}
        aria-label={`The ${props.stream} of the latest attempt`}
        data-src={`/ui/workloads/${id}/log?stream=${props.stream}&follow=1&tail=500`}
      />
      <script nonce={props.nonce} dangerouslySetInnerHTML={{ __html: LOG_TAIL_SCRIPT }} />
      <h2>Events</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Phase</th>
            <th scope="col">Reason</th>
            <th scope="col">Message</th>
          </tr>
        </thead>
        <tbody>
          {[...props.events].reverse().map((e) => (
            <tr>
              <td title={ago(e.at, nowMs)}>{utc(e.at)}</td>
              <td>
                <PhaseBadge phase={e.phase} />
              </td>
              <td>{e.reason ?? ""}</td>
              <td>{e.message ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted">Last change: {maybeTime(w.updatedAt, nowMs)}.</p>
    </Layout>
  );
}
