/**
 * `openai4s check-config FILE [--preflight]`: validates a cluster configuration and prints
 * each profile, public fields first, then what it maps to. This module never names the
 * scheduler (INV-2): the mapping lines and preflight details are the backend's words, from
 * its plugin's config check (core/ports/backend-plugin.ts), found in the list of backends.
 */

import type { ResourceProfile } from "../../core/models.ts";
import type {
  CheckedProfile,
  ConfigPreflight,
  RegisteredBackend,
} from "../../core/ports/backend-plugin.ts";
import { type Command, type CommandIo, UsageError } from "../../lib/command/command.ts";
import { parseStrict } from "../../lib/command/parse-args.ts";
import { BACKENDS, backendNamed } from "../daemon/composition/backends.ts";

const HELP = `Usage: openai4s check-config FILE [--preflight] [--backend NAME]

Check a cluster configuration (cluster.toml) and print its profiles: first what scientists
see (name, description, kinds, resources), then what each profile maps to on the cluster.

Options:
  --preflight   Also ask the cluster, per profile, whether such a job could ever start (a
                test-only submission: nothing is queued). Needs the cluster's client
                commands on PATH (and its configuration, e.g. via the environment).
  --backend NAME  The backend whose configuration FILE is (default: the first listed
                backend that takes one, as \`serve --help\` lists them).
  -h, --help    Show this help.

A placement (where jobs go, their service class, the account charged) still named as in
cluster.toml.example is a warning on stderr ("FILE:LINE: ..."), unless --preflight found
the cluster accepts the profile.

Exit codes: 0 the file is valid (and with --preflight every profile is possible);
1 with --preflight, a profile is impossible or the cluster gave no answer;
2 usage error, or the file is invalid: "FILE:LINE:COLUMN: message" on stderr.
`;

function plural(n: number, one: string, many: string = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The public fields, in the words of the API. */
function describeResources(view: ResourceProfile): string {
  const r = view.resources;
  const parts = [
    plural(r.nodes, "node"),
    `${plural(r.cpus, "CPU")} per node`,
    `${plural(r.gpus, "GPU")} per node`,
    r.memoryMb === null ? "memory: the cluster's default" : `${r.memoryMb} MB memory per node`,
    r.timeLimitSeconds === null
      ? "time limit: the cluster's default"
      : `time limit ${r.timeLimitSeconds / 60} min`,
  ];
  return parts.join(", ");
}

function renderProfile(profile: CheckedProfile, preflight: ConfigPreflight | undefined): string {
  const v = profile.view;
  const [first = "", ...rest] = profile.mapping;
  const lines = [
    `${v.name}: ${v.description}`,
    `  kinds:     ${v.kinds.join(", ")}`,
    `  resources: ${describeResources(v)}`,
    `  maps to:   ${first}`,
    ...rest.map((l) => `             ${l}`),
  ];
  if (preflight !== undefined) {
    lines.push(`  preflight: ${preflight.outcome}: ${preflight.detail}`);
  }
  return `${lines.join("\n")}\n`;
}

async function checkConfig(args: readonly string[], io: CommandIo): Promise<number> {
  const parsed = parse(args);
  if (parsed.values.help) {
    io.stdout(HELP);
    return 0;
  }
  const [file, ...extra] = parsed.positionals;
  if (file === undefined) throw new UsageError("check-config: FILE is required");
  if (extra.length > 0) throw new UsageError(`check-config: unexpected argument "${extra[0]}"`);

  const configCheck = configCheckOf(parsed.values.backend);
  const checked = configCheck.check(file);
  switch (checked.kind) {
    case "Invalid":
    case "Unreadable":
      io.stderr(`${checked.problem}\n`);
      return 2;
    case "Valid":
      break;
    default: {
      const never: never = checked;
      throw new Error(`unhandled check ${JSON.stringify(never)}`);
    }
  }

  let verdicts: readonly ConfigPreflight[] | null = null;
  if (parsed.values.preflight) {
    verdicts = await configCheck.preflight(file, io.env);
    if (verdicts === null) {
      // It loaded a moment ago: the file changed under us. Say so rather than guess.
      io.stderr(`${file}: changed while being checked; run check-config again\n`);
      return 2;
    }
  }
  const byName = new Map((verdicts ?? []).map((v) => [v.profile, v] as const));
  io.stdout(`${file}: ${plural(checked.profiles.length, "profile")}\n`);
  // A name the cluster itself accepted (preflight POSSIBLE) is the site's, whatever it is.
  for (const warning of checked.warnings) {
    if (byName.get(warning.profile)?.outcome !== "POSSIBLE")
      io.stderr(`warning: ${warning.text}\n`);
  }
  for (const profile of checked.profiles) {
    io.stdout(renderProfile(profile, byName.get(profile.view.name)));
  }
  if (verdicts === null) return 0;
  const bad = verdicts.filter((v) => v.outcome !== "POSSIBLE");
  if (bad.length > 0) {
    io.stderr(
      `preflight: ${bad.map((v) => `${v.profile} ${v.outcome}`).join(", ")}: fix the profile or the cluster before anyone queues on it\n`,
    );
    return 1;
  }
  return 0;
}

/** The named backend's config check, or the first listed backend's that has one. */
function configCheckOf(name: string | undefined): NonNullable<RegisteredBackend["configCheck"]> {
  const backend =
    name === undefined ? BACKENDS.find((b) => b.configCheck !== null) : backendNamed(name);
  if (backend === undefined) {
    throw new UsageError(
      name === undefined
        ? "check-config: no listed backend takes a config file"
        : `check-config: --backend "${name}" is not one of ${BACKENDS.map((b) => b.name).join(", ")}`,
    );
  }
  if (backend.configCheck === null) {
    throw new UsageError(`check-config: the ${backend.name} backend takes no config file`);
  }
  return backend.configCheck;
}

function parse(args: readonly string[]) {
  return parseStrict("check-config", args, {
    preflight: { type: "boolean" },
    backend: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
}

export const checkConfigCommand: Command = {
  name: "check-config",
  summary: "Validate a cluster.toml and print its profiles",
  run: checkConfig,
};
