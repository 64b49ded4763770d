/** /api/dashboard, /api/tunnels/active and /api/analytics/traffic. */
import { utcDateTime } from "../core/clock.ts";
import { badRequest } from "../core/errors.ts";
import type { ActiveTunnel } from "../core/live.ts";
import type { Route } from "./context.ts";
import { json, parseId } from "./http.ts";
import { dayTrafficJson, userTrafficJson } from "./json.ts";

const TOP_USERS = 10;
const TOP_USERS_DAYS = 30;
const MAX_DAYS = 365;

const activeTunnelJson = (t: ActiveTunnel) => ({
  ...(t.protocol === "http" ? { subdomain: t.subdomain } : { port: t.port }),
  protocol: t.protocol,
  user_id: t.userId,
  username: t.username,
  token_id: t.tokenId,
  connected_at: utcDateTime(t.connectedAt),
  bytes_in: t.bytesIn,
  bytes_out: t.bytesOut,
});

function parseDays(raw: string | null): number {
  if (raw === null) return 30;
  if (!/^[0-9]{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_DAYS) {
    throw badRequest(`days must be an integer from 1 to ${MAX_DAYS}`);
  }
  return Number(raw);
}

export const statsRoutes: Route[] = [
  {
    path: "/api/dashboard",
    methods: {
      GET: (_req, { core }) =>
        json({
          total_users: core.users.count(),
          active_tunnels: core.live.list().length,
          traffic_today: core.traffic.today(),
          top_users: core.traffic.perUser(TOP_USERS_DAYS, TOP_USERS).map(userTrafficJson),
        }),
    },
  },
  {
    path: "/api/tunnels/active",
    methods: {
      GET: (_req, { core }) => {
        const list = core.live.list().sort((a, b) => a.connectedAt.getTime() - b.connectedAt.getTime());
        return json(list.map(activeTunnelJson));
      },
    },
  },
  {
    path: "/api/analytics/traffic",
    methods: {
      GET(req, { core }) {
        const query = new URL(req.url).searchParams;
        const days = parseDays(query.get("days"));
        const rawUser = query.get("user_id");
        if (rawUser === null) return json(core.traffic.perUser(days).map(userTrafficJson));
        const user = core.users.get(parseId(rawUser, "user_id"));
        return json(core.traffic.perDay(user.id, days).map(dayTrafficJson));
      },
    },
  },
];
