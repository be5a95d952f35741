export { createMcpRoutes } from "./routes.ts";
export { TOOLS } from "./tools.ts";
