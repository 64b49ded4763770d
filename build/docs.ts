/**
 * `npm run docs`: writes the reference pages under docs/reference/ from the
 * code: the command line from the flag tables, the admin API from the
 * OpenAPI document the server serves, the codes from their tables. Running
 * it twice changes nothing; test/docs/reference.test.ts fails when a
 * committed page is not what this writes.
 *
 *   bun build/docs.ts           write the pages
 *   bun build/docs.ts --check   write nothing; exit 1 naming each page that differs
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { ROOT } from "./paths.ts";
import { REFERENCE_PAGES } from "./reference/pages.ts";

const check = process.argv.includes("--check");
let stale = 0;
for (const [path, make] of Object.entries(REFERENCE_PAGES)) {
  const text = await make();
  const file = join(ROOT, path);
  const now = existsSync(file) ? readFileSync(file, "utf8") : undefined;
  if (now === text) continue;
  if (check) {
    console.error(`${relative(ROOT, file)} is not what npm run docs writes`);
    stale++;
    continue;
  }
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
  console.log(`wrote ${relative(ROOT, file)}`);
}
process.exitCode = stale > 0 ? 1 : 0;
