export * from "../orchestration/session/session-service.ts";
export * from "./app.ts";
export * from "./deps.ts";
export * from "./problem.ts";
