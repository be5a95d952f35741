#!/usr/bin/env node
import { launch } from "./launch.mjs";

launch("openai4s-worker", import.meta.url);
