import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  connect,
  parseCommandArgs,
  pickProfile,
  printJson,
  reportFailure,
  systemRuntime,
  type WorkloadBody,
} from "./client.ts";
import { type Command, UsageError } from "./command.ts";
import { parseDuration } from "./duration.ts";

const HELP = `Usage: openai4s submit [options] -- CMD [ARG ...]

Submit a BATCH workload running CMD (no shell: pass \`sh -c '...'\` for one).
Prints the new workload's id.

Options:
  --profile NAME         Profile to run on (default: "default" when it accepts BATCH,
                         else the first profile that does; see \`openai4s profiles\`).
  --name NAME            A name for listings ([A-Za-z0-9._-], up to 63 characters).
  --time-limit DURATION  e.g. 90, 90s, 15m, 2h, 1h30m or HH:MM:SS.
  --env K=V              Environment variable for the job; repeatable.
  --max-attempts N       Attempts after node failures or preemption, 1-10 (default 1).
  --idempotency-key KEY  Retrying with the same key returns the same workload.
${CLIENT_OPTIONS_HELP}`;

export function createSubmitCommand(runtime: ClientRuntime = systemRuntime): Command {
  return {
    name: "submit",
    summary: "Submit a BATCH workload",
    async run(args, io) {
      const { values, positionals } = parseCommandArgs("submit", args, {
        profile: { type: "string" },
        name: { type: "string" },
        "time-limit": { type: "string" },
        env: { type: "string", multiple: true },
        "max-attempts": { type: "string" },
        "idempotency-key": { type: "string" },
      });
      if (values.help) {
        io.stdout(HELP);
        return 0;
      }
      if (positionals.length === 0) {
        throw new UsageError("submit: a command is required after --");
      }
      const body: Record<string, unknown> = { kind: "BATCH", command: positionals };
      if (values.name !== undefined) body["name"] = values.name;
      if (values["time-limit"] !== undefined) {
        const seconds = parseDuration(values["time-limit"]);
        if (seconds === null) {
          throw new UsageError(
            `submit: --time-limit "${values["time-limit"]}" is not a duration (90, 90s, 15m, 2h, 1h30m, HH:MM:SS)`,
          );
        }
        body["timeLimitSeconds"] = seconds;
      }
      if (values.env !== undefined) {
        const env: Record<string, string> = {};
        for (const pair of values.env) {
          const eq = pair.indexOf("=");
          if (eq <= 0) throw new UsageError(`submit: --env "${pair}" is not K=V`);
          env[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        body["env"] = env;
      }
      if (values["max-attempts"] !== undefined) {
        const n = values["max-attempts"];
        if (!/^[0-9]{1,2}$/.test(n)) {
          throw new UsageError(`submit: --max-attempts "${n}" is not a number from 1 to 10`);
        }
        body["maxAttempts"] = Number(n);
      }
      const client = connect(values, io, runtime);
      const json = values.json === true;
      if (values.profile !== undefined) {
        body["profile"] = values.profile;
      } else {
        const picked = await pickProfile(client, "BATCH");
        if (picked.kind !== "Ok") return reportFailure("submit", picked, io, json);
        if (picked.body === null) {
          io.stderr("openai4s submit: the daemon offers no profile that accepts BATCH\n");
          return 1;
        }
        body["profile"] = picked.body;
      }
      const key = values["idempotency-key"];
      const result = await client.request<WorkloadBody>("POST", "/v1/workloads", {
        body,
        ...(key !== undefined ? { headers: { "Idempotency-Key": key } } : {}),
      });
      if (result.kind !== "Ok") return reportFailure("submit", result, io, json);
      if (json) printJson(io, result.body);
      else io.stdout(`${result.body.id}\n`);
      return 0;
    },
  };
}

export const submitCommand = createSubmitCommand();
