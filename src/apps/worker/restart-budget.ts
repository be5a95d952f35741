/**
 * How often a dead kernel is restarted without being asked: at once, as Jupyter's
 * autorestart does, but not forever. An interpreter that dies as it starts (a broken Python,
 * a sitecustomize that exits) would otherwise be respawned in a tight loop, each death a
 * status message to the daemon; past the budget it is left dead, and the next exec tries.
 */
export const RESTART_BUDGET = { deaths: 3, windowMs: 60_000 } as const;

export interface RestartBudget {
  /** Records a death at `nowMs`; true when a restart is still within the budget. */
  allow(nowMs: number): boolean;
}

export function createRestartBudget(budget = RESTART_BUDGET): RestartBudget {
  const deaths: number[] = [];
  return {
    allow(nowMs) {
      deaths.push(nowMs);
      while (deaths.length > 0 && nowMs - deaths[0]! >= budget.windowMs) deaths.shift();
      return deaths.length < budget.deaths;
    },
  };
}
