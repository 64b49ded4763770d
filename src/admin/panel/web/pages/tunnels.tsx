/** Every live tunnel, refreshed every few seconds in place. */
import { api } from "../api.ts";
import { TunnelTable } from "../components/tunnels.tsx";
import { Card, ErrorBox, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { formatBytes } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";

export const LIVE_REFRESH_MS = 3000;

export function TunnelsPage() {
  useTitle("Tunnels");
  const live = useApi(api.activeTunnels, [], LIVE_REFRESH_MS);
  const totals = live.data?.reduce((s, t) => ({ in: s.in + t.bytes_in, out: s.out + t.bytes_out }), { in: 0, out: 0 });
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Live tunnels</h1>
        <p class="muted">
          {live.data ? (
            <>
              {live.data.length} open · in {formatBytes(totals!.in)} · out {formatBytes(totals!.out)} · updates every {LIVE_REFRESH_MS / 1000} s
              {live.at && <> · last {live.at.toISOString().slice(11, 19)} UTC</>}
            </>
          ) : (
            "Updates every few seconds."
          )}
        </p>
      </div>
      <Card>
        {live.error && !live.data && <ErrorBox title="Could not load live tunnels" message={live.error} retry={live.reload} />}
        <StaleWarning error={live.data ? live.error : undefined} what="live tunnels" />
        {live.data ? <TunnelTable tunnels={live.data} sampledAt={live.at} showUser /> : !live.error && <Loading what="live tunnels" />}
      </Card>
    </>
  );
}
