import { isTerminal } from "../../core/models.ts";
import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  oneId,
  printJson,
  reportFailure,
  systemRuntime,
  type WorkloadBody,
} from "./client.ts";
import { formatDuration, parseDurationFlag } from "./duration.ts";
import { messageBesideReason } from "./reason-message.ts";
import { endedStatus, WAIT_GAVE_UP, WAIT_STATUS_HELP } from "./wait-status.ts";

const HELP = `Usage: openai4s wait ID [--until READY|TERMINAL] [--timeout DURATION]

Wait for workload ID, showing a live status line on a terminal and one line per change
otherwise.

  --until READY       A SESSION whose READY condition is TRUE; a BATCH that is RUNNING
                      (or already COMPLETED). Default for a SESSION.
  --until TERMINAL    The workload ended. Default for a BATCH.
  --timeout DURATION  Give up after this long (seconds as 90, or 15m, 2h, 1d, HH:MM:SS, D-HH:MM:SS).

${WAIT_STATUS_HELP}
${CLIENT_OPTIONS_HELP}`;

const POLL_INTERVAL_MS = 500;
/** How long the daemon may stay unreachable (a restart) before waiting is pointless. */
const UNREACHABLE_GRACE_MS = 30_000;

type Until = "READY" | "TERMINAL";

type Verdict = "Reached" | "EndedOtherwise" | "Waiting";

export function judge(w: WorkloadBody, until: Until): Verdict {
  const terminal = isTerminal(w.phase);
  if (until === "TERMINAL") {
    if (!terminal) return "Waiting";
    return w.phase === "COMPLETED" ? "Reached" : "EndedOtherwise";
  }
  if (w.kind === "SESSION") {
    const ready = w.conditions.find((c) => c.type === "READY");
    if (ready?.status === "TRUE" && !terminal) return "Reached";
  } else if (w.phase === "RUNNING" || w.phase === "COMPLETED") {
    // A job that already completed certainly ran: it was "ready" before we looked.
    return "Reached";
  }
  return terminal ? "EndedOtherwise" : "Waiting";
}

function statusLine(w: WorkloadBody): string {
  const ready = w.conditions.find((c) => c.type === "READY");
  const parts = [w.id, w.phase];
  if (w.reason) parts.push(`(${w.reason})`);
  if (w.kind === "SESSION" && ready && !isTerminal(w.phase)) {
    parts.push(`READY=${ready.status}${ready.status === "TRUE" ? "" : ` ${ready.reason}`}`);
  }
  const message = messageBesideReason(w.reason, w.message);
  if (message) parts.push(`- ${message}`);
  return parts.join(" ");
}

export function createWaitCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "wait",
    summary: "Wait until a workload is READY or terminal",
    help: HELP,
    options: {
      until: { type: "string" },
      timeout: { type: "string" },
    },
    async run({ values, positionals, io, json, connect }) {
      const id = oneId("wait", positionals);
      const untilFlag = values.until?.toUpperCase();
      if (untilFlag !== undefined && untilFlag !== "READY" && untilFlag !== "TERMINAL") {
        throw new UsageError(`wait: --until "${values.until}" must be READY or TERMINAL`);
      }
      const timeoutSeconds = parseDurationFlag("wait", "--timeout", values.timeout);
      const timeoutMs = timeoutSeconds === undefined ? null : timeoutSeconds * 1000;
      const client = await connect();
      const live = !json && runtime.isTty();
      const started = runtime.now();
      let lastLine = "";
      let unreachableSince: number | null = null;
      const finishLive = () => {
        if (live && lastLine !== "") io.stdout("\n");
      };

      for (;;) {
        const result = await client.request<WorkloadBody>("GET", `/v1/workloads/${encodeId(id)}`);
        if (result.kind === "Unreachable") {
          unreachableSince ??= runtime.now();
          if (runtime.now() - unreachableSince >= UNREACHABLE_GRACE_MS) {
            finishLive();
            return reportFailure("wait", result, io, json);
          }
        } else if (result.kind === "Problem") {
          finishLive();
          return reportFailure("wait", result, io, json);
        } else {
          unreachableSince = null;
          const w = result.body;
          const verdict = judge(
            w,
            (untilFlag ?? (w.kind === "SESSION" ? "READY" : "TERMINAL")) as Until,
          );
          const line = statusLine(w);
          if (live) {
            const elapsed = formatDuration(Math.floor((runtime.now() - started) / 1000));
            io.stdout(`\r\x1b[2K${line} [${elapsed}]`);
            lastLine = line;
          } else if (!json && line !== lastLine) {
            io.stdout(`${new Date(runtime.now()).toISOString()} ${line}\n`);
            lastLine = line;
          }
          if (verdict !== "Waiting") {
            finishLive();
            if (json) printJson(io, w);
            if (verdict === "Reached") return 0;
            if (!json) {
              io.stderr(
                `openai4s wait: ${w.id} ended ${w.phase}${w.reason ? ` (${w.reason})` : ""}${w.message ? `: ${messageBesideReason(w.reason, w.message)}` : ""}\n`,
              );
            }
            return endedStatus(w);
          }
        }
        if (timeoutMs !== null && runtime.now() - started >= timeoutMs) {
          finishLive();
          io.stderr(
            `openai4s wait: timed out after ${formatDuration(Math.round(timeoutMs / 1000))} waiting for ${id}\n`,
          );
          return WAIT_GAVE_UP;
        }
        await runtime.sleep(POLL_INTERVAL_MS);
      }
    },
  });
}

export const waitCommand = createWaitCommand();
