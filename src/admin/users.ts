/** /api/users and /api/users/:id. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "./http.ts";
import { userJson } from "./json.ts";
import { CreateUserBody, definedOnly, UpdateUserBody, userSettings } from "./schemas.ts";

export const userRoutes: Route[] = [
  {
    path: "/api/users",
    methods: {
      GET: (_req, { core }) => json(core.users.list().map(userJson)),
      async POST(req, { core }) {
        const body = await parseBody(req, CreateUserBody);
        const { username, password, ...settings } = userSettings(body);
        const user = await core.users.create({ username: username!, password: password!, ...definedOnly(settings) });
        return json(userJson(user), 201, { Location: `/api/users/${user.id}` });
      },
    },
  },
  {
    path: "/api/users/:id",
    methods: {
      GET(req, { core }) {
        const user = core.users.get(parseId(req.params.id));
        return json({
          user: userJson(user),
          traffic_used: core.traffic.usedInPeriod(user),
          active_tokens: core.tokens.listForUser(user.id).filter((t) => t.enabled).length,
        });
      },
      async PUT(req, { core }) {
        const id = parseId(req.params.id);
        core.users.get(id); // 404 before 400: a body for a user that does not exist is moot
        const body = await parseBody(req, UpdateUserBody);
        return json(userJson(await core.users.update(id, definedOnly(userSettings(body)))));
      },
      DELETE(req, { core }) {
        core.users.delete(parseId(req.params.id));
        return json({ status: "deleted" });
      },
    },
  },
];
