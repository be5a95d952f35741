import type { Command } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  type EventBody,
  encodeId,
  oneId,
  printJson,
  reportFailure,
  systemRuntime,
  table,
  type WorkloadBody,
} from "./client.ts";
import { messageBesideReason } from "./reason-message.ts";
import { renderArray } from "./show-array.ts";

const HELP = `Usage: openai4s show ID

Show workload ID: its phase and reason, when the backend last confirmed that phase ("not
by the backend since the daemon started" until it answers again after a restart), its
deadline and the time left before it while it runs with a time limit, its conditions
(sessions), its allocations (one per attempt, each with the backend's own job id: "list
--backend-job-id" goes the other way), a job array's elements (counts by phase, the indices
that did not complete, and each element that failed with its reason and exit code) and its
transitions (a TIME_LIMIT_NEAR event warns
before the limit). --json prints the workload exactly as the API does.

${CLIENT_OPTIONS_HELP}`;

/** TIME_REMAINING as a person reads it: "1h02m03s", "4m10s", "12s". */
function timeLeft(seconds: number | null): string {
  if (seconds === null) return "?";
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const pad = (n: number) => String(n).padStart(2, "0");
  if (h > 0) return `${h}h${pad(m)}m${pad(s)}s`;
  if (m > 0) return `${m}m${pad(s)}s`;
  return `${s}s`;
}

/** What it asked in place of its profile's defaults; nothing when it asked none. */
function askedLine(resources: WorkloadBody["resources"] | undefined): string[] {
  // An older daemon sends no such field.
  if (resources === undefined) return [];
  const parts = [
    resources.cpus === null ? null : `${resources.cpus} CPU${resources.cpus === 1 ? "" : "s"}`,
    resources.memoryMb === null ? null : `${resources.memoryMb} MB`,
    resources.gpus === null ? null : `${resources.gpus} GPU${resources.gpus === 1 ? "" : "s"}`,
  ].filter((p) => p !== null);
  return parts.length === 0 ? [] : [`Asked:       ${parts.join(", ")} per node`];
}

function renderWorkload(w: WorkloadBody): string {
  const lines = [
    `ID:          ${w.id}`,
    `Name:        ${w.name}`,
    `Kind:        ${w.kind}`,
    `Profile:     ${w.profile}`,
    ...askedLine(w.resources),
    // Only for a principal's workload: the admin's own have none, and older daemons send none.
    ...(w.owner ? [`Owner:       ${w.owner}`] : []),
    `Phase:       ${w.phase}${w.reason ? ` (${w.reason})` : ""}`,
    // An older daemon sends no such field (undefined): nothing to say either way.
    ...(w.phaseConfirmedAt === undefined
      ? []
      : [`Confirmed:   ${w.phaseConfirmedAt ?? "not by the backend since the daemon started"}`]),
    ...(w.message ? [`Message:     ${messageBesideReason(w.reason, w.message)}`] : []),
    ...(w.exitCode !== null ? [`Exit code:   ${w.exitCode}`] : []),
    `Epoch:       ${w.executionEpoch}`,
    // An older daemon sends no deadline at all: same as none.
    ...(w.deadline
      ? [`Deadline:    ${w.deadline} (${timeLeft(w.timeRemainingSeconds)} left)`]
      : []),
    `Created:     ${w.createdAt}`,
    `Updated:     ${w.updatedAt}`,
    ...(w.lastActiveAt ? [`Last active: ${w.lastActiveAt}`] : []),
  ];
  let out = `${lines.join("\n")}\n`;
  if (w.conditions.length > 0) {
    out += `\nConditions:\n${table(
      ["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"],
      w.conditions.map((c) => [
        c.type,
        c.status,
        c.reason,
        c.lastTransitionTime,
        messageBesideReason(c.reason, c.message),
      ]),
    )}`;
  }
  if (w.allocations.length > 0) {
    out += `\nAllocations:\n${table(
      ["EPOCH", "ID", "BACKEND JOB", "PHASE", "REASON", "SUBMITTED", "STARTED", "ENDED"],
      w.allocations.map((a) => [
        String(a.epoch),
        a.id,
        a.backendJobId ?? "-",
        a.phase,
        a.reason ?? "",
        a.submittedAt ?? "-",
        a.startedAt ?? "-",
        a.endedAt ?? "-",
      ]),
    )}`;
  }
  return out + renderArray(w);
}

export function createShowCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "show",
    summary: "Show one workload with its conditions and allocations",
    help: HELP,
    options: {},
    async run({ positionals, io, json, connect }) {
      const id = oneId("show", positionals);
      const client = await connect();
      const result = await client.request<WorkloadBody>("GET", `/v1/workloads/${encodeId(id)}`);
      if (result.kind !== "Ok") return reportFailure("show", result, io, json);
      if (json) {
        printJson(io, result.body);
        return 0;
      }
      let out = renderWorkload(result.body);
      const events = await client.request<readonly EventBody[]>(
        "GET",
        `/v1/workloads/${encodeId(id)}/events`,
      );
      if (events.kind === "Ok" && events.body.length > 0) {
        out += `\nEvents:\n${table(
          ["AT", "PHASE", "REASON", "MESSAGE"],
          events.body.map((e) => [
            e.at,
            e.phase,
            e.reason ?? "",
            messageBesideReason(e.reason, e.message),
          ]),
        )}`;
      }
      io.stdout(out);
      return 0;
    },
  });
}

export const showCommand = createShowCommand();
