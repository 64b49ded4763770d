/**
 * HTTPS on the public port: how certificates are had (ACME, files given at
 * start, or none here), and each certificate with its names, issuer, how
 * long it is valid, its next renewal and, first of all, its last failure.
 */
import { api, type Certificate, type CertificateMode } from "../api.ts";
import { expiry, isWildcard, modeSentence, until } from "../certificates.ts";
import { Badge, Card, Empty, ErrorBox, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { ago, utcDateTime } from "../../../../ui/format.ts";
import { useApi, useNow, useTitle } from "../../../../ui/hooks.ts";

const REFRESH_MS = 30_000;

const MODE_BADGE: Record<CertificateMode, { tone: "ok" | "info" | "muted"; text: string }> = {
  acme: { tone: "ok", text: "ACME" },
  files: { tone: "info", text: "files" },
  off: { tone: "muted", text: "off" },
};

const EMPTY: Record<CertificateMode, string> = {
  acme: "No certificate yet. burrow asks the CA for one as soon as it needs it; a failure shows here.",
  files: "No certificate was loaded from the files given at start.",
  off: "This server does not serve HTTPS itself, so it holds no certificate.",
};

export function CertificatesPage() {
  useTitle("HTTPS");
  const report = useApi(api.certificates, [], REFRESH_MS);
  const now = useNow(60_000);
  const data = report.data;
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>HTTPS</h1>
        <p class="muted" data-testid="certificate-mode">
          {data ? (
            <>
              <Badge tone={MODE_BADGE[data.mode].tone}>{MODE_BADGE[data.mode].text}</Badge> {modeSentence(data)}
            </>
          ) : (
            "Certificates for the public port."
          )}
        </p>
      </div>
      {report.error && !data && <ErrorBox title="Could not load certificates" message={report.error} retry={report.reload} />}
      <StaleWarning error={data ? report.error : undefined} what="certificates" />
      {data ? (
        data.certificates.length === 0 ? (
          <Card>
            <Empty>{EMPTY[data.mode]}</Empty>
          </Card>
        ) : (
          data.certificates.map((c, i) => <CertificateCard key={c.id} cert={c} index={i} mode={data.mode} now={now} />)
        )
      ) : (
        !report.error && <Loading what="certificates" />
      )}
    </>
  );
}

function CertificateCard(props: { cert: Certificate; index: number; mode: CertificateMode; now: number }) {
  const { cert: c, now } = props;
  const left = expiry(c.not_after, now);
  return (
    <Card
      class="certificate"
      id={`cert-${props.index}`}
      title={<code>{c.id}</code>}
      actions={<Badge tone={left.tone}>{left.text}</Badge>}
    >
      {c.last_error && (
        <div class="error-box cert-error" data-testid="certificate-error">
          <strong>Last attempt failed ({ago(c.last_error.at, now)}, {utcDateTime(c.last_error.at)}):</strong>{" "}
          <code>{c.last_error.code}</code> <span class="error-text">{c.last_error.message}</span>
          {c.last_error.retry_after && (
            <span class="cert-retry">
              The CA asks to wait until {utcDateTime(c.last_error.retry_after)} ({until(c.last_error.retry_after, now)}).
            </span>
          )}
        </div>
      )}
      <dl class="facts">
        <dt>Names</dt>
        <dd>
          <ul class="cert-names">
            {c.names.map((n) => (
              <li key={n}>
                <code>{n}</code>{" "}
                {isWildcard(n) && (
                  <Badge tone="info" title={`every name one level under ${n.slice(2)}`}>
                    wildcard
                  </Badge>
                )}
              </li>
            ))}
          </ul>
        </dd>
        <dt>Issuer</dt>
        <dd>{c.issuer ?? "–"}</dd>
        <dt>Valid from</dt>
        <dd>{c.not_before ? utcDateTime(c.not_before) : "–"}</dd>
        <dt>Valid until</dt>
        <dd>
          {c.not_after ? utcDateTime(c.not_after) : "–"}{" "}
          <span class={`expiry ${left.tone}`} data-testid="certificate-expiry">
            {left.text}
          </span>
        </dd>
        <dt>Next renewal</dt>
        <dd>{renewal(c, props.mode, now)}</dd>
      </dl>
    </Card>
  );
}

function renewal(c: Certificate, mode: CertificateMode, now: number): string {
  if (c.next_renewal) return `${utcDateTime(c.next_renewal)} (${until(c.next_renewal, now)})`;
  return mode === "acme" ? "not scheduled" : "by hand: replace the files and restart";
}
