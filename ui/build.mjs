// Builds every app under ui/ into ui/dist: each app folder exports `build(esbuild, outdir)` from its
// own build.mjs, so the widget and the console keep their settings apart. `node build.mjs` (npm run build).
import * as esbuild from "esbuild";
import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const root = dirname(fileURLToPath(import.meta.url));
const outdir = join(root, "dist");
mkdirSync(outdir, { recursive: true });
for (const app of ["widget", "console"]) {
  const script = join(root, app, "build.mjs");
  if (!existsSync(script)) continue;
  const { build } = await import(script);
  await build(esbuild, outdir);
  console.log(`built ${app} -> ${outdir}`);
}
