/**
 * curl, the real client, against a tunnel through the edge: one request,
 * its status, headers and body (the last response's, when it follows
 * redirects), bounded in time.
 */
export interface CurlReply {
  status: number;
  /** The last response's headers, names lower-cased, values of repeated ones joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** Every status line's code, in order (redirects followed). */
  statuses: number[];
}

/** `url`: http://NAME.localhost:PORT/path (curl resolves *.localhost to loopback itself). */
export async function curl(url: string, args: string[] = []): Promise<CurlReply> {
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "-D", "-", ...args, url], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`curl ${url} failed (${code}): ${err}`);
  // heads (interim and redirects' among them), each ended by a blank line, then the last body
  const statuses: number[] = [];
  let rest = out;
  let headers: Record<string, string> = {};
  for (;;) {
    const m = /^HTTP\/[\d.]+ (\d{3})[^\r\n]*\r\n/.exec(rest);
    if (!m) break;
    const end = rest.indexOf("\r\n\r\n");
    const lines = rest.slice(m[0].length, end).split("\r\n").filter(Boolean);
    statuses.push(Number(m[1]));
    headers = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    rest = rest.slice(end + 4);
  }
  return { status: statuses.at(-1) ?? 0, headers, body: rest, statuses };
}
