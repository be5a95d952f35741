import { type Command, UsageError } from "../../lib/command/command.ts";
import type { AuditEntry } from "../../servers/http/deps.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  printJson,
  reportFailure,
  systemRuntime,
  table,
} from "./client.ts";
import { parseDuration } from "./duration.ts";
import { parseIntegerFlag } from "./numbers.ts";

const HELP = `Usage: openai4s audit [--since WHEN] [--principal NAME] [--limit N]

Print the daemon's audit log: every state-changing request (submit, cancel, exec,
principal and token changes...), with who made it (\`admin\`, a principal and its token
id, never the token), the route, the workload, the status answered and the peer. Admin
only. Kept in STATE_DIR/audit.log, rotated by size.

Options:
  --since WHEN       A duration back from now (90s, 15m, 2h, 1h30m) or an ISO 8601 time.
  --principal NAME   Only this principal's requests (\`admin\` for the admin's).
  --limit N          The newest N entries, 1-10000 (default 1000).
${CLIENT_OPTIONS_HELP}`;

function sinceIso(text: string | undefined, nowMs: number): string | undefined {
  if (text === undefined) return undefined;
  const seconds = parseDuration(text);
  if (seconds !== null) return new Date(nowMs - seconds * 1000).toISOString();
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) {
    throw new UsageError(`audit: --since "${text}" is neither a duration (2h) nor an ISO time`);
  }
  return new Date(ms).toISOString();
}

export function createAuditCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "audit",
    summary: "Print the audit log of state-changing requests (admin only)",
    help: HELP,
    options: {
      since: { type: "string" },
      principal: { type: "string" },
      limit: { type: "string" },
    },
    async run({ values, positionals, io, json, connect }) {
      if (positionals.length > 0) {
        throw new UsageError(`audit: unexpected argument "${positionals[0]}"`);
      }
      const query = new URLSearchParams();
      const since = sinceIso(values.since, runtime.now());
      if (since !== undefined) query.set("since", since);
      if (values.principal !== undefined) query.set("principal", values.principal);
      const limit = parseIntegerFlag("audit", "--limit", values.limit, { min: 1, max: 10_000 });
      if (limit !== undefined) query.set("limit", String(limit));
      const qs = query.toString();
      const result = await (await connect()).request<{ items: AuditEntry[] }>(
        "GET",
        `/v1/audit${qs ? `?${qs}` : ""}`,
      );
      if (result.kind !== "Ok") return reportFailure("audit", result, io, json);
      if (json) {
        printJson(io, result.body);
        return 0;
      }
      io.stdout(
        table(
          ["AT", "PRINCIPAL", "TOKEN", "STATUS", "ACTION", "WORKLOAD", "PEER"],
          result.body.items.map((e) => [
            e.at.replace(/\.\d{3}Z$/, "Z"),
            e.principal ?? "-",
            e.tokenId ?? "-",
            String(e.status),
            e.action,
            e.workload ?? "-",
            e.peer,
          ]),
        ),
      );
      return 0;
    },
  });
}

export const auditCommand = createAuditCommand();
