import { join } from "node:path";

/** The checkout's top folder. */
export const ROOT = join(import.meta.dir, "..");
