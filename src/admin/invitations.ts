/**
 * /api/invitations: links that make a user with the settings they carry
 * when opened on the portal (core/invitations.ts). The link is in the answer
 * that makes it only; afterwards an invitation is listed by how it stands.
 */
import { DEFAULT_INVITATION_HOURS, type InvitedSettings } from "../core/invitations.ts";
import { AppError } from "../core/errors.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { invitationJson } from "../api/json.ts";
import { EntryList, InvitationJson, NewInvitationJson, StatusBody } from "../api/responses.ts";
import type { Route } from "./context.ts";
import { CreateInvitationBody } from "./schemas.ts";

/** Where invitations are opened: the portal's address (the server's domain), or undefined when the portal is off. */
export type PortalOrigin = () => string | undefined;

const defined = <T extends object>(o: T) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export function invitationRoutes(portalOrigin: PortalOrigin): Route[] {
  return [
    {
      path: "/api/invitations",
      methods: {
        async GET(_req, { core }) {
          return json((await core.invitations.list()).map(invitationJson));
        },
        async POST(req, { core, admin, audit }) {
          const body = await parseBody(req, CreateInvitationBody);
          const origin = portalOrigin();
          if (!origin) throw new AppError("PORTAL_OFF", "invitations are opened on the portal, and this server's portal is off (--portal off)");
          const settings: Partial<InvitedSettings> = defined({
            role: body.role,
            maxTunnels: body.max_tunnels,
            allowedProtocols: body.allowed_protocols,
            trafficLimit: body.traffic_limit,
            trafficPeriod: body.traffic_period,
            maxDevices: body.max_devices,
            skipWarning: body.skip_warning,
            canUseProxy: body.can_use_proxy,
          });
          const { secret, invitation } = await core.invitations.create(settings, { hours: body.expires_in_hours ?? DEFAULT_INVITATION_HOURS, note: body.note ?? "", createdBy: admin.id });
          audit.target = `invitation:${invitation.id}`;
          audit.details = { ...defined({ ...body, note: undefined }), ...(body.note ? { note: body.note } : {}) };
          return json(
            {
              ...invitationJson(invitation),
              url: `${origin}/invite#${secret}`,
              message: "Send this link to the person you invite: it is shown only once, and works once.",
            },
            201,
            { Location: `/api/invitations/${invitation.id}` },
          );
        },
      },
      audit: { POST: "invitation.create" },
      docs: {
        GET: { summary: "Invitations, newest first, with how each stands (pending, used, expired); never their links", responses: { 200: { description: "The invitations", schema: EntryList(InvitationJson) } } },
        POST: {
          summary: "Make an invitation: a link (in this answer only) that makes one user with these settings when opened on the portal",
          description: "Settings not given are a new user's defaults. The link expires after `expires_in_hours` (default 168, at most 720) and works once.",
          body: CreateInvitationBody,
          responses: {
            201: { description: "The invitation, with its link", schema: NewInvitationJson },
            409: { description: "PORTAL_OFF: the server runs with `--portal off`, where no invitation can be opened" },
          },
        },
      },
    },
    {
      path: "/api/invitations/:id",
      methods: {
        async GET(req, { core }) {
          return json(invitationJson(await core.invitations.get(parseId(req.params.id))));
        },
        async DELETE(req, { core, audit }) {
          const id = parseId(req.params.id);
          audit.target = `invitation:${id}`;
          const gone = await core.invitations.remove(id);
          audit.details = { status: gone.status, ...(gone.usedUsername ? { used_username: gone.usedUsername } : {}) };
          return json({ status: "deleted" });
        },
      },
      audit: { DELETE: "invitation.delete" },
      docs: {
        GET: { summary: "One invitation", responses: { 200: { description: "The invitation", schema: InvitationJson } } },
        DELETE: {
          summary: "Withdraw an invitation: its link stops working (a used one's record goes; its user stays)",
          responses: { 200: { description: "Deleted", schema: StatusBody("deleted") } },
        },
      },
    },
  ];
}
