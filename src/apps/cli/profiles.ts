import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  type ProfileBody,
  printJson,
  reportFailure,
  systemRuntime,
  table,
} from "./client.ts";
import { formatDuration } from "./duration.ts";

const HELP = `Usage: openai4s profiles

List the profiles the daemon's backend offers: what each accepts and grants (CPUS,
GPUS, MEMORY and TIME LIMIT are what a workload gets unless it asks; "(max N)" is
the most it may ask for with submit --cpus, --gpus, --mem, --time-limit), and
who its jobs run as (RUN AS "owner": your own unix account, so the files a job
writes are yours and the cluster's accounting charges you; "allocation": a service
identity of the workload's own). A profile whose jobs the scheduler refuses (or
keeps rejecting) is named after the table as degraded, with the reason.

${CLIENT_OPTIONS_HELP}`;

export function createProfilesCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "profiles",
    summary: "List the profiles the daemon's backend offers",
    help: HELP,
    options: {},
    async run({ positionals, io, json, connect }) {
      if (positionals.length > 0) {
        throw new UsageError(`profiles: unexpected argument "${positionals[0]}"`);
      }
      const client = await connect();
      const result = await client.request<{ profiles: readonly ProfileBody[] }>(
        "GET",
        "/v1/profiles",
      );
      if (result.kind !== "Ok") return reportFailure("profiles", result, io, json);
      if (json) {
        printJson(io, result.body);
        return 0;
      }
      const profiles = result.body.profiles;
      io.stdout(
        table(
          [
            "NAME",
            "KINDS",
            "NODES",
            "TASKS",
            "ARRAY",
            "CPUS",
            "GPUS",
            "MEMORY",
            "TIME LIMIT",
            "NETWORK",
            "RUN AS",
            "DESCRIPTION",
          ],
          profiles.map((p) => [
            p.name,
            p.kinds.map((k) => (p.placement[k]?.placeable === false ? `${k}*` : k)).join(","),
            String(p.resources.nodes),
            // The most tasks (`submit --tasks`) a BATCH may ask for; an older daemon: one.
            String(p.resources.maxTasks ?? 1),
            // The largest `submit --array`; "-": no arrays (or an older daemon).
            p.resources.maxArraySize ? String(p.resources.maxArraySize) : "-",
            // The default, and how far `submit --cpus` may raise it ("1 (max 8)"); an older
            // daemon states no maxima.
            upTo(p.resources.cpus, p.resources.maxCpus, String),
            upTo(p.resources.gpus, p.resources.maxGpus, String),
            upTo(p.resources.memoryMb, p.resources.maxMemoryMb, (mb) => `${mb} MB`),
            upTo(p.resources.timeLimitSeconds, p.resources.maxTimeLimitSeconds, formatDuration),
            // An older daemon does not say: its jobs had the host's.
            p.network ?? "host",
            // "owner": your own unix account; an older daemon says nothing: a service uid.
            p.runAs ?? "allocation",
            p.description,
          ]),
        ),
      );
      // Environments a session may pick (`session start --env NAME`), one line per profile
      // that has any; an older daemon lists none.
      for (const p of profiles) {
        const envs = (p as { environments?: readonly { name: string; displayName: string }[] })
          .environments;
        if (envs === undefined || envs.length === 0) continue;
        const names = envs.map((e) => `${e.name} (${e.displayName})`).join(", ");
        io.stdout(`${p.name} environments (session start --env NAME): ${names}\n`);
      }
      // Why a kind cannot be placed now, once per distinct reason: the table stays narrow. A
      // degraded profile's own reason is said with its name just below.
      const notNow = new Map<string, string>();
      for (const p of profiles) {
        for (const [kind, place] of Object.entries(p.placement)) {
          if (place?.placeable === false && place.reason !== p.degraded?.reason) {
            notNow.set(
              `${kind}*:${place.reason}`,
              `${kind}* cannot be placed now (${place.reason}): ${place.message}`,
            );
          }
        }
      }
      for (const line of notNow.values()) io.stdout(`${line}\n`);
      // A degraded profile's submissions will fail: say so with the daemon's words (the
      // scheduler's own to the admin). An older daemon may not say; null: not degraded.
      for (const p of profiles) {
        const degraded = p.degraded;
        if (degraded === null || degraded === undefined) continue;
        const why = degraded.reason ?? "SUBMISSIONS_REFUSED";
        io.stdout(`${p.name} is degraded (${why}) since ${degraded.since}: ${degraded.message}\n`);
      }
      return 0;
    },
  });
}

/** `1`, or `1 (max 8)` when a workload may ask for more; "-" for none. */
function upTo(
  value: number | null,
  max: number | null | undefined,
  format: (n: number) => string,
): string {
  const shown = value === null ? "-" : format(value);
  return max === undefined || max === null || max === value
    ? shown
    : `${shown} (max ${format(max)})`;
}

export const profilesCommand = createProfilesCommand();
