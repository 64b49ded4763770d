/**
 * restrict-ips: the visitor's address (conn.client_ip: the socket's peer,
 * or behind a trusted proxy the client it names; never a header the
 * visitor wrote) must be in one of `allow` when there is an allow list,
 * and in none of `deny`. Refused: 403 in HTTP, the connection closed in
 * on_tcp_connect. `enforce: false` only records the verdict
 * (`actions.ngrok.restrict_ips.action`). Today's --allow-cidr and
 * --deny-cidr, and a user's allow_cidrs, are this action; several allow
 * lists that must all hold are several actions.
 */
import * as v from "valibot";
import { CidrList, isCidrOrAddress } from "../../http/addresses.ts";
import type { Template } from "../cel/template.ts";
import { flag, render } from "./common.ts";
import { defineAction, textResponse, type ActionContext } from "./types.ts";

/** Entries of one list. */
const MAX_CIDRS = 1000;

/** A list: its constant CIDRs parsed once; the interpolated ones per request. */
class Ranges {
  private readonly fixed: [string, CidrList][] = [];
  private readonly templated: Template[] = [];
  constructor(entries: (Template | string)[]) {
    for (const e of entries) {
      if (typeof e === "string") this.fixed.push([e, new CidrList([e])]);
      else this.templated.push(e);
    }
  }
  get empty(): boolean {
    return this.fixed.length === 0 && this.templated.length === 0;
  }
  /** The entry that holds `ip`, or undefined. */
  match(ip: string, ctx: ActionContext): string | undefined {
    for (const [text, list] of this.fixed) if (list.matches(ip)) return text;
    for (const t of this.templated) {
      const text = render(t, ctx, "a CIDR")?.trim();
      if (text === undefined) continue;
      if (!isCidrOrAddress(text)) {
        ctx.problem(`'${text}' is not an address or CIDR; it is ignored`);
        continue;
      }
      if (new CidrList([text]).matches(ip)) return text;
    }
    return undefined;
  }
}

const cidrList = v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_CIDRS)), []);

export const restrictIps = defineAction({
  type: "restrict-ips",
  phases: ["on_tcp_connect", "on_http_request", "on_http_response"],
  schema: v.strictObject({ enforce: flag, allow: cidrList, deny: cidrList, ip_policies: v.optional(v.array(v.string())) }),
  compile(config, tools) {
    if (config.ip_policies?.length) tools.error(["ip_policies"], "ngrok's IP policies are not in burrow: list their CIDRs in `allow` or `deny`");
    else if (config.allow.length === 0 && config.deny.length === 0) tools.error([], "restrict-ips needs `allow` or `deny` (or both)");
    let refused = false;
    const lists = (["allow", "deny"] as const).map((field) =>
      config[field].map((text, i): Template | string => {
        const t = tools.template(text, [field, i]);
        if (!t) refused = true;
        if (t?.constant === undefined) return t ?? "";
        if (!isCidrOrAddress(t.constant.trim())) {
          refused = true;
          tools.error([field, i], `'${t.constant}' is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or 2001:db8::/32)`);
        }
        return t.constant.trim();
      }),
    );
    if (refused) return undefined;
    const allow = new Ranges(lists[0]!);
    const deny = new Ranges(lists[1]!);
    return {
      type: "restrict-ips",
      run(ctx) {
        const ip = ctx.bindings.input.conn.clientIp;
        const denied = deny.match(ip, ctx);
        const allowed = denied === undefined ? (allow.empty ? "" : allow.match(ip, ctx)) : undefined;
        const verdict = denied === undefined && allowed !== undefined ? "allow" : "deny";
        ctx.setVariables("restrict_ips", { action: verdict, matched_cidr: denied ?? allowed ?? "" });
        if (verdict === "allow" || !config.enforce) return { kind: "continue", note: `${ip}: ${verdict}${config.enforce ? "" : " (not enforced)"}` };
        if (ctx.phase === "on_tcp_connect") return { kind: "close", note: `${ip} refused` };
        return { kind: "respond", response: textResponse(403, `Forbidden: this address (${ip}) may not reach this tunnel.\n`), note: `${ip} refused` };
      },
    };
  },
});
