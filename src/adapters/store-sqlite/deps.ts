import type { Clock } from "../../lib/clock.ts";
import type { Db } from "./database.ts";

/** What every store operation is given; nothing is reached through a module singleton. */
export interface StoreDeps {
  readonly db: Db;
  readonly clock: Clock;
}
