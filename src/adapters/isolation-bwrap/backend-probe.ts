/**
 * The isolation probe run as an allocation of the backend itself, so it proves the nodes'
 * sandbox, not the daemon host's: its two sibling allocations are laid out under a directory
 * the nodes see at the same path, one short COMMAND allocation starts a decoy sibling on the
 * node and runs the sandboxed probe beside it, and what it printed is judged exactly as the
 * local probe's output is.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ProbeOutcome } from "../../core/isolation/background-verifier.ts";
import { allocationLogPath } from "../../core/layout.ts";
import { isTerminal, mintSubmissionToken } from "../../core/models.ts";
import type {
  AllocationBackend,
  IsolationVerdict,
  Launch,
} from "../../core/ports/allocation-backend.ts";
import type { Sandbox } from "../../core/sandbox.ts";
import { type Clock, pause } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { createProbeLayout, judgeProbe, PROBE_ENV } from "./probe.ts";

/**
 * Runs on the node, outside the sandbox: starts the decoy sibling (a `sleep` exec'd through
 * a symlink named $1, so its comm is unique), runs the sandboxed probe (the rest of the
 * arguments), and reports whether the decoy was alive throughout.
 */
const NODE_SCRIPT = `
name=$1; shift
d=$(mktemp -d) || exit 97
ln -s "$(command -v sleep)" "$d/$name" || exit 97
"$d/$name" 120 &
decoy=$!
i=0
while [ "$(cat /proc/$decoy/comm 2>/dev/null)" != "$name" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
"$@"
rc=$?
if [ "$(cat /proc/$decoy/comm 2>/dev/null)" = "$name" ]; then echo decoy-alive=yes; else echo decoy-alive=no; fi
kill $decoy 2>/dev/null
rm -rf "$d"
echo "node=$(hostname 2>/dev/null || uname -n)"
exit $rc
`;

/** The node name the probe printed, when it is one (it is kept with a remembered verdict). */
function probeNode(stdout: string): readonly string[] {
  const name = /^node=([A-Za-z0-9][A-Za-z0-9._-]{0,63})$/m.exec(stdout)?.[1];
  return name === undefined ? [] : [name];
}

export interface BackendProbeOptions {
  /** The backend as it submits (NOT the sandboxed wrapper: the probe wraps itself). */
  readonly backend: AllocationBackend;
  readonly sandbox: Sandbox;
  /** A directory the nodes see at the same path, below a root the sandbox masks. */
  readonly probeRoot: string;
  /** The profile the probe allocation runs on (one that offers SESSION). */
  readonly profile: string;
  readonly clock: Clock;
  readonly log: Log;
  /** Give up (and cancel the probe) after this long. Default 120 s. */
  readonly timeoutMs?: number;
  /** The probe job's own time limit (it runs for seconds). Default: `timeoutMs`. */
  readonly jobTimeLimitSeconds?: number;
  /** Between observations. Default 500 ms. */
  readonly pollIntervalMs?: number;
  /**
   * Stops the probe early (the daemon shuts down): the allocation is cancelled and the probe
   * is Inconclusive, so nothing keeps polling or writing into a spool being removed.
   */
  readonly signal?: AbortSignal;
}

const STOPPED: ProbeOutcome = {
  kind: "Inconclusive",
  message: "the isolation probe was stopped before it ended (shutting down)",
};

/**
 * One probe allocation, judged. Inconclusive when the deadline came before the probe ever
 * ran (still queued): that says nothing about the nodes, and must not refuse sessions that
 * an earlier probe verified (background-verifier.ts keeps the last verdict).
 */
export async function verifyThroughBackend(options: BackendProbeOptions): Promise<ProbeOutcome> {
  const { backend } = options;
  if (options.signal?.aborted) return STOPPED;
  mkdirSync(options.probeRoot, { recursive: true, mode: 0o700 });
  const root = mkdtempSync(join(options.probeRoot, "probe-"));
  const unverified = (message: string): IsolationVerdict => ({
    kind: "Unverified",
    message: `isolation probe on ${backend.name}: ${message}`,
  });
  try {
    const probeRunAs = options.sandbox.identities.probe;
    const layout = createProbeLayout(root, probeRunAs);
    const submitted = await submitProbe(options, layout);
    if (submitted.kind === "NotSubmitted") return unverified(submitted.message);
    const waited = await waitForProbe(options, submitted.target);
    if (waited.kind !== "Ended")
      return waited.kind === "Failed" ? unverified(waited.message) : waited.outcome;
    const { ended } = waited;
    const stdoutPath = allocationLogPath(layout.allocationDir, "stdout");
    const stdout = existsSync(stdoutPath) ? readFileSync(stdoutPath, "utf8") : "";
    const stderrPath = allocationLogPath(layout.allocationDir, "stderr");
    const stderr = existsSync(stderrPath) ? readFileSync(stderrPath, "utf8") : "";
    const verdict = judgeProbe(
      layout,
      {
        exitCode: ended.phase === "COMPLETED" ? 0 : (ended.exitCode ?? 1),
        stdout,
        stderr: stderr === "" ? `the probe allocation ended ${ended.phase}` : stderr,
        decoyAlive: /^decoy-alive=yes$/m.test(stdout),
      },
      `bubblewrap on the ${backend.name} nodes (private mount, PID and IPC namespaces, unprivileged uid, no capabilities)`,
    );
    return verdict.kind === "Verified"
      ? { ...verdict, nodes: probeNode(stdout) }
      : unverified(verdict.message);
  } catch (error) {
    return unverified(String(error));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

type ProbeTarget = Parameters<AllocationBackend["observe"]>[0][number];

/** The probe's one COMMAND allocation, submitted: its target, or why there is none. */
async function submitProbe(
  options: BackendProbeOptions,
  layout: ReturnType<typeof createProbeLayout>,
): Promise<
  | { readonly kind: "Submitted"; readonly target: ProbeTarget }
  | { readonly kind: "NotSubmitted"; readonly message: string }
> {
  const probeRunAs = options.sandbox.identities.probe;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const wrapped = options.sandbox.wrap(layout.argv, layout.paths, PROBE_ENV, probeRunAs);
  const launch: Launch = {
    kind: "COMMAND",
    command: ["/bin/sh", "-c", NODE_SCRIPT, "o4s-node-probe", layout.decoyName, ...wrapped],
    env: {},
  };
  const token = mintSubmissionToken((n) => randomBytes(n));
  const allocationId = `isolation-probe-${randomBytes(6).toString("hex")}`;
  const results = await options.backend.submit([
    {
      allocationId,
      workloadId: "isolation-probe",
      workloadKind: "BATCH",
      token,
      epoch: 0,
      profile: options.profile,
      name: "isolation-probe",
      launch,
      timeLimitSeconds: options.jobTimeLimitSeconds ?? Math.ceil(timeoutMs / 1000),
      allocationDir: layout.allocationDir,
      workspaceDir: layout.workspace,
    },
  ]);
  const submitted = results.get(token);
  if (!submitted)
    return { kind: "NotSubmitted", message: "the backend gave no answer for the probe" };
  switch (submitted.kind) {
    case "Created":
    case "Existing":
      return { kind: "Submitted", target: { allocationId, token, handle: submitted.handle } };
    case "Rejected":
      return { kind: "NotSubmitted", message: `the probe was refused: ${submitted.message}` };
    case "Unknown":
      return {
        kind: "NotSubmitted",
        message: `the probe's submission is unknown: ${submitted.message}`,
      };
    default: {
      const never: never = submitted;
      throw new Error(`unhandled submit result ${JSON.stringify(never)}`);
    }
  }
}

type Waited =
  | { readonly kind: "Ended"; readonly ended: { exitCode: number | null; phase: string } }
  /** Stopped, or still queued at the deadline: an outcome that is not a verdict on the nodes. */
  | { readonly kind: "Outcome"; readonly outcome: ProbeOutcome }
  | { readonly kind: "Failed"; readonly message: string };

/** Polls the probe until it ends, the deadline passes (cancelled), or the signal stops it. */
async function waitForProbe(options: BackendProbeOptions, target: ProbeTarget): Promise<Waited> {
  const { backend } = options;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  const deadline = options.clock.now() + timeoutMs;
  let ran = false;
  for (;;) {
    if (options.signal?.aborted) {
      await backend.cancel([target]);
      return { kind: "Outcome", outcome: STOPPED };
    }
    if (options.clock.now() > deadline) {
      await backend.cancel([target]);
      const waited = `no result within ${Math.round(timeoutMs / 1000)} s`;
      return ran
        ? { kind: "Failed", message: waited }
        : {
            kind: "Outcome",
            outcome: {
              kind: "Inconclusive",
              message: `isolation probe on ${backend.name} still queued: ${waited}`,
            },
          };
    }
    const observed = await backend.observe([target]);
    if (observed.kind === "Observed") {
      const o = observed.observations.get(target.allocationId);
      if (o?.kind === "Observed" && o.phase !== "QUEUED") ran = true;
      if (o?.kind === "Observed" && isTerminal(o.phase)) {
        return { kind: "Ended", ended: { exitCode: o.exitCode, phase: o.phase } };
      }
    }
    await pause(pollIntervalMs, options.signal);
  }
}
