/**
 * docs/reference/portal-api.md: every route of the portal (the users' API on
 * the server's domain, the device login's, invitations', company sign-in's),
 * from the route table's own documentation, rendered as the admin API's
 * reference is (the same OpenAPI builder and tables).
 */
import { buildOpenApi } from "../../src/admin/openapi.ts";
import { portalRoutes } from "../../src/portal/app.ts";
import { operationSection } from "./api.ts";
import { anchor, generatedNotice, page, table } from "./markdown.ts";

type Operation = Record<string, any>;

/** Company sign-in's routes exist only with an issuer: the table is made with one, as a server with --portal-oidc-issuer has it. */
const EXAMPLE_OIDC = {
  issuer: "https://id.example.com",
  clientId: "burrow",
  clientSecret: "x",
  allowDomains: [],
  allowGroups: [],
  inviteOnly: false,
  defaults: { maxTunnels: 0, maxDevices: 0, trafficLimit: 0, trafficPeriod: "monthly" as const, allowedProtocols: "http,tcp" },
};

const GROUPS: [RegExp, string][] = [
  [/^\/_burrow\/api\/(login|logout)$/, "session"],
  [/^\/_burrow\/api\/me/, "your things"],
  [/^\/_burrow\/(device|api\/device)/, "device login"],
  [/^\/_burrow\/api\/invitation/, "invitations"],
  [/^\/_burrow\/(api\/sign-in-options|api\/oidc|oidc)/, "company sign-in"],
];

const SCHEMES = {
  portalSession: { type: "apiKey", in: "cookie", name: "__Host-burrow_portal", description: "Set by POST /_burrow/api/login (and by an invitation or company sign-in); named `burrow_portal` over plain HTTP." },
};

export function portalApiReference(): string {
  const routes = portalRoutes(() => "", EXAMPLE_OIDC, () => "tunnels.example.com");
  const doc = buildOpenApi(routes.map((r) => ({ path: r.path, methods: Object.keys(r.methods), public: r.public, docs: r.docs }))) as { paths: Record<string, Record<string, Operation>> };
  const groups = new Map<string, string[]>();
  for (const [path, methods] of Object.entries(doc.paths)) {
    const group = GROUPS.find(([re]) => re.test(path.replace(/\{([a-z_]+)\}/g, ":$1")))?.[1] ?? "other";
    for (const [method, op] of Object.entries(methods)) {
      groups.set(group, [...(groups.get(group) ?? []), operationSection(method, path, op, SCHEMES, "a signed-in user: the portal's session cookie")]);
    }
  }
  return page([
    generatedNotice("the portal's route table (`build/reference/portal-api.ts`)"),
    "# Portal API",
    "The portal is served on the server's domain itself (`https://tunnels.example.com/`, the apex), on the public port, with `--portal on` (the default). Its API is for a user's own things: a script with the session cookie may call it as the page does. It never acts as an admin: admins use the [admin API](api.md). Bodies are JSON; errors are `{\"error\": message}` with the status of their code ([codes](codes.md#admin-api-errors)), except the device login's token endpoint, which answers as RFC 8628 says. Writes from a browser must come from the portal's own page (Origin, Sec-Fetch-Site). See [the portal](../portal.md).",
    page([
      "Credentials:",
      table(
        ["name", "kind", "how"],
        Object.entries(SCHEMES).map(([name, s]) => [`\`${name}\``, `cookie \`${s.name}\``, s.description]),
      ),
    ]),
    table(
      ["group", "routes"],
      [...groups.keys()].map((g) => [`[${g}](#${anchor(g)})`, String(groups.get(g)!.length)]),
    ),
    ...[...groups.entries()].map(([group, sections]) => page([`## ${group}`, ...sections])),
  ]);
}
