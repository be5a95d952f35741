import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  createWorkload,
  systemRuntime,
} from "./client.ts";
import { parseDurationFlag } from "./duration.ts";
import { parseResourceFlags, RESOURCE_OPTIONS, resourceFlagsHelp } from "./resource-flags.ts";

const HELP = `Usage: openai4s session start [options]

Start an interactive SESSION: a kernel on granted resources. Prints its id; then
\`openai4s wait ID\` until it is READY and \`openai4s exec ID CODE\` to run code.

Options:
  --profile NAME           Profile to run on (default: "default" when it accepts
                           SESSION, else the first profile that does).
  --env NAME               One of the profile's environments (a venv, conda env or
                           modules the admin declared; \`openai4s profiles\` lists them).
                           Default: the node's python3.
  --name NAME              A name for listings.
  --idle-timeout DURATION  Stop the session after this long without exec or tasks
                           (seconds as 90, or 15m, 2h, 1h30m, HH:MM:SS,
                           D-HH:MM; at least 60 s).
  --time-limit DURATION    Hard limit on the session's allocation, as a batch
                           scheduler's --time reads it:
                           a bare number is minutes (90), or 2h, 1d, D-HH:MM:SS.
${resourceFlagsHelp(27, false)}
  --idempotency-key KEY    Retrying with the same key returns the same session.
${CLIENT_OPTIONS_HELP}`;

export function createSessionCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "session",
    summary: "Start an interactive SESSION (`session start`)",
    help: HELP,
    options: {
      profile: { type: "string" },
      env: { type: "string" },
      name: { type: "string" },
      "idle-timeout": { type: "string" },
      "time-limit": { type: "string" },
      ...RESOURCE_OPTIONS,
      "idempotency-key": { type: "string" },
    },
    async run({ values, positionals, io, json, connect }) {
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
      const fields: Record<string, unknown> = {};
      if (values.name !== undefined) fields["name"] = values.name;
      if (values.env !== undefined) fields["environment"] = values.env;
      const idle = parseDurationFlag("session start", "--idle-timeout", values["idle-timeout"]);
      if (idle !== undefined) fields["idleTimeoutSeconds"] = idle;
      const limit = parseDurationFlag(
        "session start",
        "--time-limit",
        values["time-limit"],
        "minutes",
      );
      if (limit !== undefined) fields["timeLimitSeconds"] = limit;
      const resources = parseResourceFlags("session start", values);
      if (resources !== undefined) fields["resources"] = resources;
      return createWorkload(
        await connect(),
        {
          command: "session start",
          kind: "SESSION",
          fields,
          profile: values.profile,
          idempotencyKey: values["idempotency-key"],
        },
        io,
        json,
      );
    },
  });
}

export const sessionCommand = createSessionCommand();
