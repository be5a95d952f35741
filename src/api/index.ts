export * from "./app.ts";
export * from "./deps.ts";
export * from "./problem.ts";
export * from "./session-service.ts";
