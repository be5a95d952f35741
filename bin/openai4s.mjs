#!/usr/bin/env node
import { launch } from "./launch.mjs";

launch("openai4s", import.meta.url);
