import { Hono } from "hono";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { profileView } from "../views.ts";

export function createProfileRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();

  app.get("/v1/profiles", function profiles(c) {
    return c.json({ profiles: deps.backend.profiles().map(profileView) });
  });

  return app;
}
