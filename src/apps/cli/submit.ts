import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  createWorkload,
  systemRuntime,
} from "./client.ts";
import { parseDependencyFlags } from "./dependency-flags.ts";
import { parseDurationFlag } from "./duration.ts";
import { parseIntegerFlag } from "./numbers.ts";
import { parseResourceFlags, RESOURCE_OPTIONS, resourceFlagsHelp } from "./resource-flags.ts";

const HELP = `Usage: openai4s submit [options] -- CMD [ARG ...]

Submit a BATCH workload running CMD (no shell: pass \`sh -c '...'\` for one).
Prints the new workload's id.

Options:
  --profile NAME         Profile to run on (default: "default" when it accepts BATCH,
                         else the first profile that does; see \`openai4s profiles\`).
  --name NAME            A name for listings ([A-Za-z0-9._-], up to 63 characters).
  --time-limit DURATION  As a batch scheduler's --time reads it: a bare number is
                         minutes (90), or 90s, 15m,
                         2h, 1d, 1h30m, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS.
${resourceFlagsHelp(25, true)}
  --env K=V              Environment variable for the job; repeatable.
  --max-attempts N       Attempts after node failures or preemption, 1-10 (default 1).
  --array N              Run CMD as a job array of N elements (0..N-1), each told its
                         index in OPENAI4S_ARRAY_INDEX, at most the profile's limit.
  --max-concurrent M     With --array: at most M elements at once.
  --tasks N              Run CMD as N tasks (MPI ranks) across the profile's nodes, each
                         in its own sandbox with the cluster's per-task variables (its
                         rank, the node list; see docs/operations.md), at most the
                         profile's maxTasks (default 1: CMD runs once, on the first node).
  --tasks-per-node M     With --tasks: at most M tasks on one node.
  --after-ok ID          Run once workload ID COMPLETED (afterok); if it ends otherwise
                         this one ends CANCELLED, DEPENDENCY_NEVER_SATISFIED. Repeatable.
  --after ID             Run once workload ID ended, however (afterany). Repeatable.
  --dependency SPEC      As batch schedulers spell it: afterok:ID[:ID...] and
                         afterany:ID[:ID...], joined by commas.
  --hold                 Create it held: upload its input (\`openai4s cp\`), then
                         \`openai4s release ID\`.
  --idempotency-key KEY  Retrying with the same key returns the same workload.
${CLIENT_OPTIONS_HELP}`;

export function createSubmitCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "submit",
    summary: "Submit a BATCH workload",
    help: HELP,
    options: {
      profile: { type: "string" },
      name: { type: "string" },
      "time-limit": { type: "string" },
      ...RESOURCE_OPTIONS,
      env: { type: "string", multiple: true },
      "max-attempts": { type: "string" },
      array: { type: "string" },
      "max-concurrent": { type: "string" },
      tasks: { type: "string" },
      "tasks-per-node": { type: "string" },
      "after-ok": { type: "string", multiple: true },
      after: { type: "string", multiple: true },
      dependency: { type: "string", multiple: true },
      hold: { type: "boolean" },
      "idempotency-key": { type: "string" },
    },
    async run({ values, positionals, io, json, connect }) {
      if (positionals.length === 0) {
        throw new UsageError("submit: a command is required after --");
      }
      const fields: Record<string, unknown> = { command: positionals };
      if (values.name !== undefined) fields["name"] = values.name;
      const limit = parseDurationFlag("submit", "--time-limit", values["time-limit"], "minutes");
      if (limit !== undefined) fields["timeLimitSeconds"] = limit;
      const resources = parseResourceFlags("submit", values);
      if (resources !== undefined) fields["resources"] = resources;
      if (values.env !== undefined) {
        const env: Record<string, string> = {};
        for (const pair of values.env) {
          const eq = pair.indexOf("=");
          if (eq <= 0) throw new UsageError(`submit: --env "${pair}" is not K=V`);
          env[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        fields["env"] = env;
      }
      if (values["max-attempts"] !== undefined) {
        const n = values["max-attempts"];
        if (!/^[0-9]{1,2}$/.test(n)) {
          throw new UsageError(`submit: --max-attempts "${n}" is not a number from 1 to 10`);
        }
        fields["maxAttempts"] = Number(n);
      }
      // Bounds are the server's (the profile's array limit): only the form is checked here.
      const array = parseIntegerFlag("submit", "--array", values.array, { min: 1, max: 4_000_001 });
      if (array !== undefined) fields["array"] = array;
      const cap = parseIntegerFlag("submit", "--max-concurrent", values["max-concurrent"], {
        min: 1,
        max: 4_000_001,
      });
      if (cap !== undefined) fields["maxConcurrent"] = cap;
      for (const [flag, field] of [
        ["tasks", "tasks"],
        ["tasks-per-node", "tasksPerNode"],
      ] as const) {
        const n = values[flag];
        if (n === undefined) continue;
        if (!/^[1-9][0-9]{0,6}$/.test(n)) {
          throw new UsageError(`submit: --${flag} "${n}" is not a whole number of tasks ≥ 1`);
        }
        fields[field] = Number(n);
      }
      const deps = parseDependencyFlags(values["after-ok"], values.after, values.dependency);
      if (deps.afterOk.length > 0) fields["afterOk"] = deps.afterOk;
      if (deps.afterAny.length > 0) fields["afterAny"] = deps.afterAny;
      if (values.hold === true) fields["hold"] = true;
      return createWorkload(
        await connect(),
        {
          command: "submit",
          kind: "BATCH",
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

export const submitCommand = createSubmitCommand();
