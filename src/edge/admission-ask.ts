/**
 * The admission hook (--admission-hook, webhooks/admission-hook.ts) asked
 * about tunnels the rules admitted, before they go live: a HELLO's, and a
 * tunnel a live session adds (wire.ts ADD), each entry path the same ask.
 */
import type { Admitted } from "../core/admission.ts";
import { deviceFields } from "../core/device-ids.ts";
import { AppError } from "../core/errors.ts";
import type { AdmissionAsk } from "../webhooks/admission-hook.ts";
import type { EdgeContext } from "./agent-context.ts";

/** What the hook is asked: who, from where, and the tunnels the rules granted. */
export function admissionAsk(admitted: Admitted, address: string): AdmissionAsk {
  return {
    user_id: admitted.user.id,
    username: admitted.user.username,
    ...deviceFields(admitted.token.id),
    device_name: admitted.token.deviceName,
    address,
    tunnels: admitted.tunnels.flatMap((t) => {
      if (t instanceof AppError) return [];
      const named = "subdomain" in t ? t : undefined;
      const ported = "port" in t ? t : undefined;
      const priv = "private" in t ? t.private : undefined;
      return [{ kind: t.protocol, name: priv?.name ?? named?.subdomain ?? null, hostname: named?.hostname ?? null, port: ported?.port ?? null, private: priv !== undefined }];
    }),
  };
}

/** The operator's word on what the rules admitted: its refusal, or undefined (admitted, or no hook). */
export function askAdmissionHook(edge: EdgeContext, admitted: Admitted, address: string): Promise<AppError | undefined> {
  return edge.admissionHook ? edge.admissionHook(admissionAsk(admitted, address)) : Promise.resolve(undefined);
}
