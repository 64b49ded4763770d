/** The dashboard: counts, today's traffic, 30 days as a chart, the top users and what is live. */
import { api } from "../api.ts";
import { TrafficChart } from "../../../../ui/components/chart.tsx";
import { TunnelTable } from "../components/tunnels.tsx";
import { Card, ErrorBox, Link, Loading, StaleWarning, Stat } from "../../../../ui/components/ui.tsx";
import { formatBytes } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { systemDays } from "../traffic.ts";

const STATS_REFRESH_MS = 5000;
const CHART_REFRESH_MS = 60_000;
const LIVE_PREVIEW = 5;

export function DashboardPage() {
  useTitle("Dashboard");
  const dash = useApi(api.dashboard, [], STATS_REFRESH_MS);
  const days = useApi(() => systemDays(30), [], CHART_REFRESH_MS);
  const live = useApi(api.activeTunnels, [], STATS_REFRESH_MS);

  const month = days.data?.reduce(
    (s, d) => ({ in: s.in + d.bytes_in, out: s.out + d.bytes_out, total: s.total + d.total }),
    { in: 0, out: 0, total: 0 },
  );
  const topMax = Math.max(1, ...(dash.data?.top_users.map((u) => u.total) ?? [1]));

  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Dashboard</h1>
        <p class="muted">Traffic days run midnight to midnight UTC.</p>
      </div>
      {dash.error && !dash.data && <ErrorBox title="Could not load the dashboard" message={dash.error} retry={dash.reload} />}
      <StaleWarning error={dash.data ? dash.error : undefined} what="the dashboard" />
      <div class="stats">
        <Stat label="Users" value={dash.data ? dash.data.total_users : "…"} sub="accounts, admins included" href="/users" />
        <Stat
          label="Live tunnels"
          value={dash.data ? dash.data.active_tunnels : "…"}
          sub={dash.data?.active_tunnels ? "open right now" : "none open"}
          href="/tunnels"
          tone={dash.data?.active_tunnels ? "live" : ""}
        />
        <Stat label="Traffic today" value={dash.data ? formatBytes(dash.data.traffic_today) : "…"} sub="since 00:00 UTC" />
        <Stat
          label="Last 30 days"
          value={month ? formatBytes(month.total) : "…"}
          sub={month ? `in ${formatBytes(month.in)} · out ${formatBytes(month.out)}` : "adding up…"}
        />
      </div>

      <div class="grid two-one">
        <Card title="Traffic, last 30 days" id="chart">
          {days.error && !days.data && <ErrorBox title="Could not load traffic" message={days.error} retry={days.reload} />}
          <StaleWarning error={days.data ? days.error : undefined} what="the chart" />
          {days.data ? <TrafficChart days={days.data} caption="All users, per UTC day" /> : !days.error && <Loading what="traffic" />}
        </Card>
        <Card title="Top users" id="top" actions={<span class="muted small">last 30 days</span>}>
          {dash.data && dash.data.top_users.length === 0 && <p class="empty">No traffic yet.</p>}
          <ol class="top-users">
            {dash.data?.top_users.map((u) => (
              <li key={u.user_id}>
                <div class="top-line">
                  <Link href={`/users/${u.user_id}`}>{u.username}</Link>
                  <span class="num">{formatBytes(u.total)}</span>
                </div>
                <div class="bar" aria-hidden="true">
                  <span class="bar-in" style={{ width: `${(u.bytes_in / topMax) * 100}%` }} />
                  <span class="bar-out" style={{ width: `${(u.bytes_out / topMax) * 100}%` }} />
                </div>
                <div class="muted small">
                  in {formatBytes(u.bytes_in)} · out {formatBytes(u.bytes_out)}
                </div>
              </li>
            ))}
          </ol>
        </Card>
      </div>

      <Card
        title="Live now"
        id="live"
        actions={
          <Link class="btn small" href="/tunnels">
            All tunnels
          </Link>
        }
      >
        {live.error && !live.data && <ErrorBox title="Could not load live tunnels" message={live.error} retry={live.reload} />}
        <StaleWarning error={live.data ? live.error : undefined} what="live tunnels" />
        {live.data ? (
          <>
            <TunnelTable tunnels={live.data.slice(0, LIVE_PREVIEW)} sampledAt={live.at} showUser />
            {live.data.length > LIVE_PREVIEW && (
              <p class="muted small">
                and {live.data.length - LIVE_PREVIEW} more: <Link href="/tunnels">see all {live.data.length}</Link>
              </p>
            )}
          </>
        ) : (
          !live.error && <Loading what="live tunnels" />
        )}
      </Card>
    </>
  );
}
