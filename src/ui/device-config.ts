/** A device's remote config as the admin API and the portal answer it (GET/PUT .../tokens/:id/config). */
export interface TunnelsConfig {
  /** burrow.yml's `tunnels:` map. */
  tunnels: Record<string, unknown>;
  /** 0: none was set. */
  version: number;
  updated_at: string | null;
}
