/** /api/dashboard, /api/tunnels/active and /api/analytics/traffic. */
import * as v from "valibot";
import type { Route } from "./context.ts";
import { json, parseQuery } from "../api/http.ts";
import { activeTunnelJson, dayTrafficJson, userTrafficJson } from "../api/json.ts";
import { ActiveTunnelJson, DashboardJson, DayTrafficJson, EntryList, UserTrafficJson } from "../api/responses.ts";
import { TrafficQuery } from "./schemas.ts";

const TOP_USERS = 10;
const TOP_USERS_DAYS = 30;


const DEFAULT_DAYS = 30;

export const statsRoutes: Route[] = [
  {
    path: "/api/dashboard",
    methods: {
      GET: async (_req, { core }) =>
        json({
          total_users: await core.users.count(),
          active_tunnels: (await core.live.list()).length,
          traffic_today: await core.traffic.today(),
          top_users: (await core.traffic.perUser(TOP_USERS_DAYS, TOP_USERS)).map(userTrafficJson),
        }),
    },
    docs: { GET: { summary: "Totals for the dashboard", responses: { 200: { description: "The dashboard", schema: DashboardJson } } } },
  },
  {
    path: "/api/tunnels/active",
    methods: {
      GET: async (_req, { core }) => {
        const list = (await core.live.list()).sort((a, b) => a.connectedAt.getTime() - b.connectedAt.getTime());
        return json(list.map(activeTunnelJson));
      },
    },
    docs: {
      GET: { summary: "Live tunnels, oldest first", responses: { 200: { description: "The live tunnels", schema: EntryList(ActiveTunnelJson) } } },
    },
  },
  {
    path: "/api/analytics/traffic",
    methods: {
      async GET(req, { core }) {
        const query = parseQuery(req, TrafficQuery);
        const days = query.days ?? DEFAULT_DAYS;
        if (query.user_id === undefined) return json((await core.traffic.perUser(days)).map(userTrafficJson));
        const user = await core.users.get(query.user_id);
        return json((await core.traffic.perDay(user.id, days)).map(dayTrafficJson));
      },
    },
    docs: {
      GET: {
        summary: "Traffic: per day for one user (user_id), else per user, over the last `days` days",
        query: TrafficQuery,
        responses: {
          200: { description: "With user_id: one record a day, oldest first, zero-filled. Without: one record per user with traffic, largest first", schema: v.union([EntryList(DayTrafficJson), EntryList(UserTrafficJson)]) },
          404: { description: "No such user" },
        },
      },
    },
  },
];
