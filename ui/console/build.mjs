// The operator console: one bundled script and stylesheet plus index.html, into <outdir>/console/.
// Relative URLs throughout, so the same files work at /console/ on the gateway or from any host.
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

export async function build(esbuild, outdir) {
  const target = join(outdir, "console");
  mkdirSync(target, { recursive: true });
  await esbuild.build({
    entryPoints: { console: join(here, "src", "main.tsx") },
    bundle: true,
    minify: true,
    sourcemap: false,
    format: "esm",
    target: ["es2020"],
    jsx: "automatic",
    jsxImportSource: "preact",
    outdir: target,
    logLevel: "warning",
  });
  copyFileSync(join(here, "index.html"), join(target, "index.html"));
  copyFileSync(join(here, "src", "console.css"), join(target, "console.css"));
}
