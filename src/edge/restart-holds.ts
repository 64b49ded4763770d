/**
 * Names kept across a restart. A stopping server writes down which http
 * and tls tunnel names were live (subdomains and custom hostnames), of
 * which kind, for which token, and which pool each was a member of; the server that starts next
 * on the same data dir holds each name for that token for the grace period,
 * as if its agent had just dropped. So while agents are on their way back
 * (a fraction of a second after DRAIN), no other token can take their names,
 * and visitors wait a moment for them instead of hearing there is no tunnel.
 * The file is read once and removed; a stale one (an old crash) is ignored.
 */
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import * as v from "valibot";
import { log } from "../log.ts";
import { NAMED_KINDS } from "../protocol/kinds.ts";

/** A file older than this is from another time, not from the restart that started us. */
const MAX_AGE_MS = 60_000;

const Holds = v.object({
  writtenAt: v.number(),
  tunnels: v.array(
    v.object({
      /** At least one of the two: a tunnel may have a hostname and no subdomain. */
      subdomain: v.optional(v.pipe(v.string(), v.maxLength(63))),
      hostname: v.optional(v.pipe(v.string(), v.maxLength(253))),
      /** Absent in a file an older server wrote: an http tunnel's. */
      protocol: v.optional(v.picklist(NAMED_KINDS), "http"),
      /** A pool member's: how its pool spreads requests. */
      pool: v.optional(v.picklist(["round-robin", "least-requests"])),
      userId: v.number(),
      username: v.string(),
      tokenId: v.number(),
      skipWarning: v.boolean(),
    }),
  ),
});

export type Hold = v.InferOutput<typeof Holds>["tunnels"][number];

export function writeHolds(path: string, tunnels: Hold[]): void {
  try {
    const tmp = `${path}.tmp`;
    writeFileSync(tmp, JSON.stringify({ writtenAt: Date.now(), tunnels }), { mode: 0o600 });
    renameSync(tmp, path);
  } catch (err) {
    log.warn("could not write the names to keep across the restart", { err: (err as Error).message });
  }
}

/** The holds a stopping server left, removed as they are read; none when there is no fresh file. */
export function takeHolds(path: string, now = Date.now()): Hold[] {
  if (!existsSync(path)) return [];
  let parsed;
  try {
    parsed = v.safeParse(Holds, JSON.parse(readFileSync(path, "utf8")));
  } catch {
    parsed = undefined;
  }
  rmSync(path, { force: true });
  if (!parsed?.success || now - parsed.output.writtenAt > MAX_AGE_MS || parsed.output.writtenAt > now + 5_000) return [];
  return parsed.output.tunnels.filter((t) => t.subdomain !== undefined || t.hostname !== undefined);
}
