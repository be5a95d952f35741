/** IsolationVerdictStore over SQLite. */
import type { IsolationVerdictStore } from "../../../core/ports/isolation-verdict-store.ts";
import type { StoreDeps } from "../deps.ts";
import {
  forgetIsolationVerdict,
  loadIsolationVerdict,
  saveIsolationVerdict,
} from "../ops/isolation-verdict.ts";

export function bindIsolationVerdictStore(deps: StoreDeps): IsolationVerdictStore {
  return {
    load: (backend) => loadIsolationVerdict(deps, backend),
    save: (verdict) => saveIsolationVerdict(deps, verdict),
    forget: (backend) => forgetIsolationVerdict(deps, backend),
  };
}
