/**
 * Prometheus's own checker, for the tests that prove `/metrics` and the shipped alerting
 * rules are what Prometheus accepts. `.ci/run` installs it (Debian's `prometheus`); a
 * developer without it gets a skip with a line saying so, never a silent pass.
 */
export const PROMTOOL: string | null = Bun.which("promtool");

export function skipLine(what: string): void {
  console.warn(`SKIP ${what}: promtool is not installed (apt-get install prometheus)`);
}

export interface PromtoolResult {
  readonly code: number;
  /** stdout and stderr together: promtool writes lint findings to either. */
  readonly output: string;
}

/** `promtool check metrics`, the exposition on stdin: code 0 and no output when clean. */
export async function checkMetrics(text: string): Promise<PromtoolResult> {
  if (PROMTOOL === null) throw new Error("promtool is not installed");
  const p = Bun.spawn([PROMTOOL, "check", "metrics"], {
    stdin: new TextEncoder().encode(text),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  return { code, output: `${out}${err}` };
}

/** `promtool check rules FILE` or `promtool test rules FILE` (the rules' unit tests). */
export async function checkRules(
  path: string,
  mode: "check" | "test" = "check",
): Promise<PromtoolResult> {
  if (PROMTOOL === null) throw new Error("promtool is not installed");
  const p = Bun.spawn([PROMTOOL, mode, "rules", path], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  return { code, output: `${out}${err}` };
}
