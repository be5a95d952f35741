/**
 * The largest array a profile takes: the site's MaxArraySize, read from the controller
 * (`scontrol show config`), not assumed. With the constant (Slurm's default, 1,001) a site
 * that raised it could not run a bigger sweep through the daemon, and one that lowered it
 * had arrays admitted that sbatch then refused. Read in the background from the start (a
 * controller that is down must not hold the daemon's start) and again every `retryMs` until
 * it answers once; until then profiles show the default. A site with arrays turned off
 * (MaxArraySize=0) shows profiles that run no arrays, so admission refuses `array` by name.
 */
import type { ResourceProfile } from "../../core/models.ts";
import { backgroundLoop } from "../../lib/background-loop.ts";
import { backgroundTimers, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { PlacementCatalog } from "./backend.ts";
import type { SlurmBroker } from "./broker.ts";

export interface SiteArrayLimit {
  /** `base` with every array-taking profile's limit the site's, once known. */
  catalog(base: PlacementCatalog): PlacementCatalog;
  /** The site's MaxArraySize, null until the controller answered. */
  known(): number | null;
  /** Asks the controller once; true when it answered. */
  readOnce(): Promise<boolean>;
  start(): void;
  stop(): Promise<void>;
}

export function createSiteArrayLimit(options: {
  readonly broker: SlurmBroker;
  readonly log: Log;
  readonly retryMs: number;
  /** Default: timers that do not hold the process open. */
  readonly timers?: Timers;
}): SiteArrayLimit {
  const { broker, log } = options;
  const timers = options.timers ?? backgroundTimers;
  let limit: number | null = null;

  async function readOnce(): Promise<boolean> {
    const answer = await broker.readSiteConfig();
    if (answer.kind === "Failed") {
      log.warn("could not read the site's MaxArraySize; profiles show Slurm's default", {
        error: answer.error.message,
      });
      return false;
    }
    const read = answer.value.maxArraySize;
    if (read !== null && read !== limit) log.info("site MaxArraySize", { maxArraySize: read });
    limit = read ?? limit;
    return true;
  }

  const loop = backgroundLoop({
    timers,
    run: async () => ((await readOnce()) ? null : options.retryMs),
    onError: (error) =>
      log.error("reading the site's configuration failed", { error: String(error) }),
    afterErrorMs: options.retryMs,
  });

  const withLimit = (profile: ResourceProfile): ResourceProfile => {
    if (limit === null || profile.maxArraySize === undefined) return profile;
    if (limit >= 1) return { ...profile, maxArraySize: limit };
    const { maxArraySize: _none, ...noArrays } = profile;
    return noArrays;
  };

  return {
    catalog(base) {
      let seen: { readonly limit: number | null; readonly views: readonly ResourceProfile[] } = {
        limit: null,
        views: base.profiles(),
      };
      return {
        profiles() {
          // Rebuilt only when the limit changed: profiles() is read on every admission.
          if (seen.limit !== limit) {
            seen = { limit, views: Object.freeze(base.profiles().map(withLimit)) };
          }
          return seen.views;
        },
        placement: (name) => base.placement(name),
      };
    },
    known: () => limit,
    readOnce,
    start: () => loop.start(),
    stop: () => loop.stop(),
  };
}
