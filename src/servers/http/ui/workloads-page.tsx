/** @jsxImportSource hono/jsx */
/** The workload list: newest first, filtered by phase, kind, profile and owner, keyset-paged. */

import {
  isUnreadable,
  type ListedWorkload,
  type TwoWayWorkloadPage,
  type WorkloadKey,
} from "../../../adapters/store-sqlite/index.ts";
import { PHASES, WORKLOAD_KINDS } from "../../../core/models.ts";
import { ago, utc } from "./format.ts";
import { Layout, PhaseBadge } from "./layout.tsx";

export interface ListFilters {
  readonly phase?: string | undefined;
  readonly kind?: string | undefined;
  readonly profile?: string | undefined;
  /** A principal's name, or ADMIN_OWNER_OPTION for the admin's own workloads. */
  readonly owner?: string | undefined;
}

/** The owner filter's choice for workloads the admin submitted (no principal is named so). */
export const ADMIN_OWNER_OPTION = "(admin)";

export interface WorkloadsPageProps {
  readonly nonce: string;
  readonly logoutCsrf: string | undefined;
  readonly filters: ListFilters;
  readonly profiles: readonly string[];
  /** Principals' names, for the owner filter. */
  readonly owners: readonly string[];
  readonly page: TwoWayWorkloadPage;
  /** Live workloads by phase, whatever the filters: what an admin looks at first. */
  readonly live: Readonly<Record<string, number>>;
  readonly nowMs: number;
}

const LIVE_PHASES = ["PENDING", "SUBMITTING", "QUEUED", "RUNNING", "STOPPING"] as const;

/** `createdAt.id`, the same shape as the API's cursor text but readable in a URL. */
export function keyText(w: WorkloadKey): string {
  return `${w.createdAt}.${w.id}`;
}

function pageHref(filters: ListFilters, edge: "after" | "before", w: WorkloadKey): string {
  const q = new URLSearchParams();
  if (filters.phase) q.set("phase", filters.phase);
  if (filters.kind) q.set("kind", filters.kind);
  if (filters.profile) q.set("profile", filters.profile);
  if (filters.owner) q.set("owner", filters.owner);
  q.set(edge, keyText(w));
  return `/ui/workloads?${q.toString()}`;
}

function Select(props: {
  readonly name: string;
  readonly label: string;
  readonly options: readonly string[];
  readonly value: string | undefined;
}) {
  return (
    <label>
      {props.label}
      <select name={props.name}>
        <option value="">any</option>
        {props.options.map((o) => (
          <option value={o} selected={o === props.value}>
            {o}
          </option>
        ))}
      </select>
    </label>
  );
}

function Row(props: { readonly w: ListedWorkload; readonly nowMs: number }) {
  const { w, nowMs } = props;
  if (isUnreadable(w)) {
    return (
      <tr>
        <td class="mono">{w.id}</td>
        <td colspan={6}>
          <strong>unreadable</strong>
          <div class="muted">this workload's stored record cannot be read: {w.message}</div>
        </td>
        <td title={utc(w.createdAt)}>{ago(w.createdAt, nowMs)}</td>
        <td />
      </tr>
    );
  }
  return (
    <tr>
      <td class="mono">
        <a href={`/ui/workloads/${encodeURIComponent(w.id)}`}>{w.id}</a>
      </td>
      <td>{w.name}</td>
      <td>{w.kind}</td>
      <td>{w.profile}</td>
      <td>{w.owner ?? ADMIN_OWNER_OPTION}</td>
      <td>
        <PhaseBadge phase={w.phase} />
      </td>
      <td>
        {w.reason ?? ""}
        {w.message ? <div class="muted">{w.message}</div> : null}
      </td>
      <td title={utc(w.createdAt)}>{ago(w.createdAt, nowMs)}</td>
      <td title={utc(w.updatedAt)}>{ago(w.updatedAt, nowMs)}</td>
    </tr>
  );
}

export function WorkloadsPage(props: WorkloadsPageProps) {
  const { page, filters } = props;
  const first = page.items[0];
  const last = page.items.at(-1);
  return (
    <Layout title="Workloads" section="workloads" nonce={props.nonce} logoutCsrf={props.logoutCsrf}>
      <h1>Workloads</h1>
      <div class="cards">
        {LIVE_PHASES.map((phase) => (
          <a class="card" href={`/ui/workloads?phase=${phase}`}>
            <div class="label">{phase}</div>
            <div class="value">{String(props.live[phase] ?? 0)}</div>
          </a>
        ))}
      </div>
      <form class="filters" method="get" action="/ui/workloads">
        <Select name="phase" label="Phase" options={PHASES} value={filters.phase} />
        <Select name="kind" label="Kind" options={WORKLOAD_KINDS} value={filters.kind} />
        <Select name="profile" label="Profile" options={props.profiles} value={filters.profile} />
        <Select
          name="owner"
          label="Owner"
          options={[ADMIN_OWNER_OPTION, ...props.owners]}
          value={filters.owner}
        />
        <button type="submit">Filter</button>
      </form>
      <table>
        <caption class="muted">Newest first</caption>
        <thead>
          <tr>
            <th scope="col">ID</th>
            <th scope="col">Name</th>
            <th scope="col">Kind</th>
            <th scope="col">Profile</th>
            <th scope="col">Owner</th>
            <th scope="col">Phase</th>
            <th scope="col">Reason</th>
            <th scope="col">Created</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          {page.items.length === 0 ? (
            <tr>
              <td colspan={9} class="muted">
                No workloads match.
              </td>
            </tr>
          ) : (
            page.items.map((w) => <Row w={w} nowMs={props.nowMs} />)
          )}
        </tbody>
      </table>
      <nav class="pager" aria-label="Pages">
        {page.hasNewer && first ? (
          <a rel="prev" href={pageHref(filters, "before", first)}>
            ← Newer
          </a>
        ) : null}
        {page.hasOlder && last ? (
          <a rel="next" href={pageHref(filters, "after", last)}>
            Older →
          </a>
        ) : null}
      </nav>
    </Layout>
  );
}
