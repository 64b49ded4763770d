/** The user's overview: usage against their limits, what is live, 30 days of traffic, their names. */
import { TrafficChart } from "../../../ui/components/chart.tsx";
import { Badge, Card, Empty, ErrorBox, Loading, Progress, StaleWarning, Stat } from "../../../ui/components/ui.tsx";
import { duration, formatBytes, formatQuota, PERIOD_WORDS, utcDateTime } from "../../../ui/format.ts";
import { useApi, useNow, useTitle } from "../../../ui/hooks.ts";
import { api, type MyTunnel, type SharedTunnel } from "../api.ts";
import { useMe } from "../session.ts";

const LIVE_REFRESH_MS = 5000;
const CHART_REFRESH_MS = 60_000;

export function OverviewPage() {
  useTitle("Overview");
  const { me } = useMe();
  const live = useApi(api.tunnels, [], LIVE_REFRESH_MS);
  const days = useApi(() => api.traffic(30), [], CHART_REFRESH_MS);
  const domains = useApi(api.domains, []);
  const hostnames = useApi(api.hostnames, []);
  const shared = useApi(api.shared, [], LIVE_REFRESH_MS);
  const u = me.user;
  const period = PERIOD_WORDS[u.traffic_period];

  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Hello, {u.username}</h1>
        <p class="muted">Your tunnels, traffic and limits on {location.hostname}.</p>
      </div>
      <div class="stats">
        <Stat label="Live tunnels" value={live.data ? live.data.length : "…"} sub={u.max_tunnels > 0 ? `of ${u.max_tunnels} at most` : "no limit"} tone={live.data?.length ? "live" : ""} />
        <Stat label="Devices" value={me.devices} sub={u.max_devices > 0 ? `of ${u.max_devices} at most` : "no limit"} href="/devices" />
        <Stat label={`Traffic ${period.noun}`} value={formatBytes(me.traffic_used)} sub={u.traffic_limit > 0 ? `of ${formatQuota(u.traffic_limit, u.traffic_period)}` : "no limit"} />
        <Stat label="Protocols" value={u.allowed_protocols.split(",").join(", ")} sub="you may open" />
      </div>
      {u.traffic_limit > 0 && (
        <Card title="Quota" id="quota">
          <Progress value={me.traffic_used} max={u.traffic_limit} label={`${formatBytes(me.traffic_used)} of ${formatBytes(u.traffic_limit)} used ${period.noun}`} />
          <p class="muted small">
            {formatBytes(me.traffic_used)} of {formatBytes(u.traffic_limit)} used {period.noun}; past it, your tunnels close until the period ends (UTC).
          </p>
        </Card>
      )}
      <Card title="Live now" id="live">
        {live.error && !live.data && <ErrorBox title="Could not load your tunnels" message={live.error} retry={live.reload} />}
        <StaleWarning error={live.data ? live.error : undefined} what="your tunnels" />
        {live.data ? <Tunnels tunnels={live.data} /> : !live.error && <Loading what="your tunnels" />}
      </Card>
      {shared.data && shared.data.length > 0 && (
        <Card title="Shared with you" id="shared">
          <SharedTunnels tunnels={shared.data} />
        </Card>
      )}
      <Card title="Traffic, last 30 days" id="chart">
        {days.error && !days.data && <ErrorBox title="Could not load traffic" message={days.error} retry={days.reload} />}
        {days.data ? <TrafficChart days={days.data} caption="Your tunnels, per UTC day" /> : !days.error && <Loading what="traffic" />}
      </Card>
      <div class="grid two">
        <Card title="Reserved subdomains" id="domains">
          {domains.error && <ErrorBox title="Could not load" message={domains.error} retry={domains.reload} />}
          {domains.data && domains.data.length === 0 && <Empty>None: an admin can reserve a name for you.</Empty>}
          <ul class="list">
            {domains.data?.map((d) => (
              <li key={d.id}>
                <span class="mono">{d.subdomain}</span>
              </li>
            ))}
          </ul>
        </Card>
        <Card title="Your hostnames" id="hostnames">
          {hostnames.error && <ErrorBox title="Could not load" message={hostnames.error} retry={hostnames.reload} />}
          {hostnames.data && hostnames.data.length === 0 && <Empty>None: an admin can register a hostname of yours.</Empty>}
          <ul class="list">
            {hostnames.data?.map((h) => (
              <li key={h.id}>
                <span class="mono">{h.hostname}</span> {h.verified ? <Badge tone="ok">verified</Badge> : <Badge tone="warn">not verified</Badge>}
                {!h.verified && (
                  <span class="muted small block">
                    TXT <code>{h.verification.name}</code> = <code>{h.verification.value}</code>
                  </span>
                )}
              </li>
            ))}
          </ul>
        </Card>
      </div>
    </>
  );
}

function Tunnels(props: { tunnels: MyTunnel[] }) {
  const now = useNow();
  if (props.tunnels.length === 0) {
    return (
      <Empty>
        Nothing is live. On a device, run <code>burrow http 3000</code> (or <code>burrow tcp 5432</code>).
      </Empty>
    );
  }
  return (
    <table class="cards-on-phone tunnels" data-testid="my-tunnels">
      <thead>
        <tr>
          <th scope="col">Address</th>
          <th scope="col">Device</th>
          <th scope="col">Up for</th>
          <th scope="col" class="num">
            In
          </th>
          <th scope="col" class="num">
            Out
          </th>
        </tr>
      </thead>
      <tbody>
        {props.tunnels.map((t) => (
          <tr key={`${t.url}:${t.connected_at}`}>
            <td data-label="Address">
              {t.private ? (
                <span class="mono">{t.private.target}</span>
              ) : t.protocol === "http" ? (
                <a href={t.url} target="_blank" rel="noopener noreferrer">
                  {t.url.replace(/^https?:\/\//, "")}
                </a>
              ) : (
                <span class="mono">{t.url}</span>
              )}{" "}
              <Badge tone="info">{t.protocol}</Badge>
              {t.pool && <Badge tone={t.in_rotation ? "ok" : "warn"}>{t.in_rotation ? "pool" : "pool, out of rotation"}</Badge>}
              {t.private && (
                <>
                  {" "}
                  <Badge tone="warn">private</Badge>
                  <div class="muted small">
                    {t.private.shares.length > 0 ? `shared with ${t.private.shares.join(", ")}` : "shared with no one: only you"}
                    {t.private.connected > 0 ? `; ${t.private.connected} connected` : ""}
                  </div>
                </>
              )}
            </td>
            <td data-label="Device">{t.device_name ?? "—"}</td>
            <td data-label="Up for" title={`since ${utcDateTime(t.connected_at)}`}>
              {duration(t.connected_at, now)}
            </td>
            <td data-label="In" class="num">
              {formatBytes(t.bytes_in)}
            </td>
            <td data-label="Out" class="num">
              {formatBytes(t.bytes_out)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Private tunnels others share with the user: how to reach each, and whether it is there now. */
function SharedTunnels(props: { tunnels: SharedTunnel[] }) {
  return (
    <table class="cards-on-phone" data-testid="shared-tunnels">
      <thead>
        <tr>
          <th scope="col">Tunnel</th>
          <th scope="col">Now</th>
          <th scope="col">Reach it with</th>
        </tr>
      </thead>
      <tbody>
        {props.tunnels.map((t) => (
          <tr key={t.target}>
            <td data-label="Tunnel">
              <span class="mono">{t.target}</span> <Badge tone="info">{t.protocol}</Badge>
            </td>
            <td data-label="Now">{t.online ? <Badge tone="ok">online</Badge> : <Badge tone="warn">offline</Badge>}</td>
            <td data-label="Reach it with">
              <code>{t.command}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
