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

const HELP = `Usage: openai4s session start [options]

Start an interactive SESSION: a kernel on granted resources. Prints its id; then
\`openai4s wait ID\` until it is READY and \`openai4s exec ID CODE\` to run code.

Options:
  --profile NAME           Profile to run on (default: "default" when it accepts
                           SESSION, else the first profile that does).
  --name NAME              A name for listings.
  --idle-timeout DURATION  Stop the session after this long without exec or tasks
                           (90, 15m, 2h, 1h30m, HH:MM:SS; at least 60 s).
  --time-limit DURATION    Hard limit on the session's allocation.
  --idempotency-key KEY    Retrying with the same key returns the same session.
${CLIENT_OPTIONS_HELP}`;

function duration(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const seconds = parseDuration(text);
  if (seconds === null) {
    throw new UsageError(
      `session start: ${flag} "${text}" is not a duration (90, 90s, 15m, 2h, 1h30m, HH:MM:SS)`,
    );
  }
  return seconds;
}

export function createSessionCommand(runtime: ClientRuntime = systemRuntime): Command {
  return {
    name: "session",
    summary: "Start an interactive SESSION (`session start`)",
    async run(args, io) {
      const { values, positionals } = parseCommandArgs("session", args, {
        profile: { type: "string" },
        name: { type: "string" },
        "idle-timeout": { type: "string" },
        "time-limit": { type: "string" },
        "idempotency-key": { type: "string" },
      });
      if (values.help) {
        io.stdout(HELP);
        return 0;
      }
      const [action, extra] = positionals;
      if (action !== "start") {
        throw new UsageError(
          action === undefined
            ? "session: an action is required: session start"
            : `session: unknown action "${action}" (known: start)`,
        );
      }
      if (extra !== undefined)
        throw new UsageError(`session start: unexpected argument "${extra}"`);
      const body: Record<string, unknown> = { kind: "SESSION" };
      if (values.name !== undefined) body["name"] = values.name;
      const idle = duration("--idle-timeout", values["idle-timeout"]);
      if (idle !== undefined) body["idleTimeoutSeconds"] = idle;
      const limit = duration("--time-limit", values["time-limit"]);
      if (limit !== undefined) body["timeLimitSeconds"] = limit;
      const client = connect(values, io, runtime);
      const json = values.json === true;
      if (values.profile !== undefined) {
        body["profile"] = values.profile;
      } else {
        const picked = await pickProfile(client, "SESSION");
        if (picked.kind !== "Ok") return reportFailure("session start", picked, io, json);
        if (picked.body === null) {
          io.stderr("openai4s session start: the daemon offers no profile that accepts SESSION\n");
          return 1;
        }
        body["profile"] = picked.body;
      }
      const key = values["idempotency-key"];
      const result = await client.request<WorkloadBody>("POST", "/v1/workloads", {
        body,
        ...(key !== undefined ? { headers: { "Idempotency-Key": key } } : {}),
      });
      if (result.kind !== "Ok") return reportFailure("session start", result, io, json);
      if (json) printJson(io, result.body);
      else io.stdout(`${result.body.id}\n`);
      return 0;
    },
  };
}

export const sessionCommand = createSessionCommand();
