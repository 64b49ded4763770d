/** The pages a visitor stopped by a tunnel's access rules sees (as a Response, or as its parts for a traffic policy's answer). */
import { escapeHtml } from "../../http/html.ts";
import { page, pageParts } from "../pages.ts";

type Parts = ReturnType<typeof pageParts>;

/** IP rules: the visitor's address is not allowed (or is denied). */
export function addressRefusedPage(host: string, address: string): Response {
  return asResponse(addressRefused(host, address));
}

export function addressRefused(host: string, address: string): Parts {
  return pageParts(
    403,
    "Forbidden",
    `<div class="status">403</div><h1>Not from this address</h1>
<p>The tunnel at <code>${escapeHtml(host)}</code> does not take visitors from <code>${escapeHtml(address)}</code>.</p>`,
  );
}

/** Authentication is needed: `challenge` is the WWW-Authenticate value. */
export function signInRequiredPage(host: string, challenge: string, why = "This tunnel asks for a user name and password."): Response {
  return asResponse(signInRequired(host, challenge, why));
}

export function signInRequired(host: string, challenge: string, why = "This tunnel asks for a user name and password."): Parts {
  return pageParts(401, "Sign-in required", `<div class="status">401</div><h1>Sign-in required</h1><p>${escapeHtml(why)}</p><p><code>${escapeHtml(host)}</code></p>`, {
    "WWW-Authenticate": challenge,
  });
}

/** An OIDC sign-in that failed or an email that is not allowed. */
export function signInRefusedPage(status: 400 | 403, why: string): Response {
  return page(status, "Sign-in refused", `<div class="status">${status}</div><h1>Sign-in refused</h1><p>${escapeHtml(why)}</p><a class="button" href="/">Start again</a>`);
}

/** Basic auth: too many wrong passwords from this address; it may try again after `retryAfterS`. */
export function tooManyGuessesPage(host: string, retryAfterS: number): Response {
  return asResponse(tooManyGuesses(host, retryAfterS));
}

export function tooManyGuesses(host: string, retryAfterS: number): Parts {
  return pageParts(
    429,
    "Too many attempts",
    `<div class="status">429</div><h1>Too many attempts</h1><p>Too many wrong passwords from your address. Try again in ${retryAfterS} s.</p><p><code>${escapeHtml(host)}</code></p>`,
    { "Retry-After": String(retryAfterS) },
  );
}

const asResponse = (p: Parts) => new Response(p.body, { status: p.status, headers: p.headers });
