import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  printJson,
  reportFailure,
  systemRuntime,
  table,
} from "./client.ts";
import { parseIntegerFlag } from "./numbers.ts";

const HELP = `Usage: openai4s principal add NAME [--unix-user USER] [limits]
       openai4s principal list
       openai4s principal remove NAME

Principals are the API's callers besides the admin: each sees and touches only its own
workloads (another's answers 404) and is held to its limits. Admin only. Give one a token
with \`openai4s token issue NAME\`. Removing a principal revokes its tokens; its workloads
stay, visible to the admin (\`openai4s list --owner NAME\`).

Limits (add): a whole number, or "none" for unlimited; a limit not given takes the
daemon's default for new principals (serve --principal-max-*).
  --max-sessions N   Live SESSIONs at once.
  --max-batch N      Live BATCH workloads at once.
  --max-cpus N       CPUs held by its live workloads (the profiles' CPUs).
  --max-gpus N       GPUs held by its live workloads.
  --unix-user USER   The unix account this principal is (unique).
${CLIENT_OPTIONS_HELP}`;

interface PrincipalBody {
  readonly name: string;
  readonly unixUser: string | null;
  readonly maxSessions: number | null;
  readonly maxBatch: number | null;
  readonly maxCpus: number | null;
  readonly maxGpus: number | null;
  readonly createdAt: string;
}

/** A limit flag: absent (the default), "none" (null, unlimited) or a whole number. */
function limitFlag(flag: string, text: string | undefined): number | null | undefined {
  if (text === "none") return null;
  return parseIntegerFlag("principal add", flag, text, { min: 0, max: 1_000_000 });
}

const show = (n: number | null) => (n === null ? "-" : String(n));

export function createPrincipalCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "principal",
    summary: "Add, list or remove principals (admin only)",
    help: HELP,
    options: {
      "unix-user": { type: "string" },
      "max-sessions": { type: "string" },
      "max-batch": { type: "string" },
      "max-cpus": { type: "string" },
      "max-gpus": { type: "string" },
    },
    async run({ values, positionals, io, json, connect }) {
      const [action, name, ...rest] = positionals;
      if (rest.length > 0) throw new UsageError(`principal: unexpected argument "${rest[0]}"`);
      const client = await connect();
      switch (action) {
        case "add": {
          if (name === undefined) throw new UsageError("principal add: NAME is required");
          const limits = {
            maxSessions: limitFlag("--max-sessions", values["max-sessions"]),
            maxBatch: limitFlag("--max-batch", values["max-batch"]),
            maxCpus: limitFlag("--max-cpus", values["max-cpus"]),
            maxGpus: limitFlag("--max-gpus", values["max-gpus"]),
          };
          const body = Object.fromEntries(
            Object.entries({ name, unixUser: values["unix-user"], ...limits }).filter(
              ([, v]) => v !== undefined,
            ),
          );
          const result = await client.request<PrincipalBody>("POST", "/v1/principals", { body });
          if (result.kind !== "Ok") return reportFailure("principal add", result, io, json);
          if (json) printJson(io, result.body);
          else io.stdout(`principal added: ${result.body.name}\n`);
          return 0;
        }
        case "list": {
          if (name !== undefined) throw new UsageError(`principal list: unexpected "${name}"`);
          const result = await client.request<{ items: PrincipalBody[] }>("GET", "/v1/principals");
          if (result.kind !== "Ok") return reportFailure("principal list", result, io, json);
          if (json) {
            printJson(io, result.body);
            return 0;
          }
          io.stdout(
            table(
              ["NAME", "UNIX-USER", "SESSIONS", "BATCH", "CPUS", "GPUS", "CREATED"],
              result.body.items.map((p) => [
                p.name,
                p.unixUser ?? "-",
                show(p.maxSessions),
                show(p.maxBatch),
                show(p.maxCpus),
                show(p.maxGpus),
                p.createdAt.replace(/\.\d{3}Z$/, "Z"),
              ]),
            ),
          );
          return 0;
        }
        case "remove": {
          if (name === undefined) throw new UsageError("principal remove: NAME is required");
          const result = await client.request<null>("DELETE", `/v1/principals/${encodeId(name)}`);
          if (result.kind !== "Ok") return reportFailure("principal remove", result, io, json);
          if (json) printJson(io, { name, removed: true });
          else io.stdout(`principal removed: ${name} (its tokens no longer work)\n`);
          return 0;
        }
        default:
          throw new UsageError(
            `principal: expected add, list or remove${action === undefined ? "" : `, not "${action}"`}`,
          );
      }
    },
  });
}

export const principalCommand = createPrincipalCommand();
