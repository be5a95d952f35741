export * from "./backend.ts";
export * from "./supervise-command.ts";
