/** The SQLite adapter of the activity port (core/ports/activity-recorder.ts). */
import type { ActivityRecorder } from "../../../core/ports/activity-recorder.ts";
import type { StoreDeps } from "../deps.ts";
import { touchActivity } from "../ops/touch-activity.ts";

export function bindActivityRecorder(deps: StoreDeps): ActivityRecorder {
  return { touch: (workloadId) => touchActivity(deps, workloadId) };
}
