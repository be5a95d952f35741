import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  printJson,
  reportFailure,
  systemRuntime,
  table,
  type WorkloadBody,
} from "./client.ts";

const HELP = `Usage: openai4s list [options]

List workloads, newest first.

Options:
  --kind KIND      BATCH or SESSION.
  --phase PHASE    PENDING, SUBMITTING, QUEUED, RUNNING, STOPPING, COMPLETED, FAILED,
                   CANCELLED or LOST.
  --backend-job-id ID
                   Only the workload one of whose attempts is (or was) this job of the
                   backend (the job id its own tools show).
  --owner NAME     Only this principal's workloads (the admin's filter; a principal's
                   token lists only its own).
  --limit N        Page size, 1-500 (default 50).
  --all            Follow pages to the end.
${CLIENT_OPTIONS_HELP}`;

interface Page {
  readonly items: readonly WorkloadBody[];
  readonly nextCursor: string | null;
}

export function createListCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "list",
    summary: "List workloads",
    help: HELP,
    options: {
      kind: { type: "string" },
      phase: { type: "string" },
      "backend-job-id": { type: "string" },
      owner: { type: "string" },
      limit: { type: "string" },
      all: { type: "boolean" },
    },
    async run({ values, positionals, io, json, connect }) {
      if (positionals.length > 0) {
        throw new UsageError(`list: unexpected argument "${positionals[0]}"`);
      }
      if (values.limit !== undefined && !/^[0-9]{1,3}$/.test(values.limit)) {
        throw new UsageError(`list: --limit "${values.limit}" is not a number from 1 to 500`);
      }
      const client = await connect();
      const items: WorkloadBody[] = [];
      let cursor: string | null = null;
      let more = false;
      do {
        const query = new URLSearchParams();
        if (values.kind !== undefined) query.set("kind", values.kind);
        if (values.phase !== undefined) query.set("phase", values.phase);
        const jobId = values["backend-job-id"];
        if (jobId !== undefined) query.set("backendJobId", jobId);
        if (values.owner !== undefined) query.set("owner", values.owner);
        if (values.limit !== undefined) query.set("limit", values.limit);
        if (cursor !== null) query.set("cursor", cursor);
        const qs = query.toString();
        const result = await client.request<Page>("GET", `/v1/workloads${qs ? `?${qs}` : ""}`);
        if (result.kind !== "Ok") return reportFailure("list", result, io, json);
        items.push(...result.body.items);
        cursor = result.body.nextCursor;
        more = cursor !== null;
      } while (values.all && cursor !== null);
      if (json) {
        printJson(io, { items, nextCursor: cursor });
        return 0;
      }
      io.stdout(
        table(
          ["ID", "KIND", "PHASE", "REASON", "PROFILE", "OWNER", "CREATED", "NAME"],
          items.map((w) => [
            w.id,
            w.kind,
            w.phase,
            w.reason ?? "",
            w.profile,
            w.owner ?? "-",
            w.createdAt.replace(/\.\d{3}Z$/, "Z"),
            w.name,
          ]),
        ),
      );
      if (more) io.stderr("(more workloads: --all to list them all)\n");
      return 0;
    },
  });
}

export const listCommand = createListCommand();
