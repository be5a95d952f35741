/**
 * Crash injection for tests that must prove recovery after a `kill -9` at an exact point
 * (e.g. "the record is durable but nothing was started yet"). A real crash cannot be timed
 * from outside at that granularity, so the process kills itself with SIGKILL: no finally
 * blocks, no exit handlers, no flushed buffers, exactly like the crash it stands in for.
 *
 * The environment is read ONCE, by the composition root, and the result injected; call
 * sites only ever call `hit(name)`, which is a set lookup that is false in production.
 */

/** The variable only crash tests set; its value is a comma-separated list of point names. */
export const FAULT_POINT_ENV = "OPENAI4S_FAULT_POINT";

export interface FaultPoints {
  /** Called at a named point; does nothing unless that point was enabled. */
  hit(point: string): void;
}

export const noFaultPoints: FaultPoints = { hit() {} };

/** Enabled points die by SIGKILL, the way a real crash would. */
export function faultPointsFromEnv(env: Readonly<Record<string, string | undefined>>): FaultPoints {
  const raw = env[FAULT_POINT_ENV];
  if (raw === undefined || raw.trim() === "") return noFaultPoints;
  const enabled: ReadonlySet<string> = new Set(
    raw
      .split(",")
      .map((p) => p.trim())
      .filter((p) => p.length > 0),
  );
  return {
    hit(point) {
      if (enabled.has(point)) process.kill(process.pid, "SIGKILL");
    },
  };
}
