/**
 * A device's tunnels kept on the server (its remote config), by its token:
 * burrow.yml's `tunnels:` map, which `burrow start --remote` runs. The map
 * is checked by the agent's own reader before it comes here (the admin API
 * and the portal call agent/settings/tunnels-json.ts), so what is kept is
 * what an agent reads. Each change counts up `version` and tells the live
 * sessions of the token at once (LiveTunnels.configChanged, on every node).
 */
import { eq, sql } from "drizzle-orm";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import type { LiveTunnels } from "./live.ts";
import type { Tokens } from "./tokens.ts";

export interface TokenConfig {
  tokenId: number;
  /** {NAME: {proto, addr, ...}}; {} when none was set. */
  tunnels: Record<string, unknown>;
  /** 0 when none was set; one more for each change. */
  version: number;
  updatedAt: string | null;
}

export type TokenConfigs = ReturnType<typeof createTokenConfigs>;

export function createTokenConfigs(store: Store, clock: Clock, tokens: Tokens, live: LiveTunnels) {
  const { tokenConfigs } = store.tables;

  /** The token's config (404 for no such token). */
  async function get(tokenId: number): Promise<TokenConfig> {
    await tokens.get(tokenId);
    return read(tokenId);
  }

  /** What is kept, without asking whether the token exists (the edge's read, for a session of it). */
  async function read(tokenId: number): Promise<TokenConfig> {
    const row = await store.get(store.db.select().from(tokenConfigs).where(eq(tokenConfigs.tokenId, tokenId)));
    if (!row) return { tokenId, tunnels: {}, version: 0, updatedAt: null };
    return { tokenId, tunnels: JSON.parse(row.tunnels) as Record<string, unknown>, version: row.version, updatedAt: row.updatedAt };
  }

  return {
    get,
    read,

    /**
     * The token's tunnels from now on (`tunnels` checked by the caller): kept
     * with the next version, then the token's live agents told (404 for no
     * such token).
     */
    async set(tokenId: number, tunnels: Record<string, unknown>): Promise<TokenConfig> {
      await tokens.get(tokenId);
      const text = JSON.stringify(tunnels);
      const updatedAt = isoTimestamp(clock.now());
      await store.run(
        store.db
          .insert(tokenConfigs)
          .values({ tokenId, tunnels: text, version: 1, updatedAt })
          .onConflictDoUpdate({ target: tokenConfigs.tokenId, set: { tunnels: text, version: sql`${tokenConfigs.version} + 1`, updatedAt } }),
      );
      live.configChanged?.(tokenId);
      return read(tokenId);
    },
  };
}
