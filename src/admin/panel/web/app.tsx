/**
 * The shell: checks the session, shows sign-in or the signed-in layout
 * (header with the current user, navigation, notices) and the page for the
 * address bar's path.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, messageOf, whenSessionLost, type Me, type ServerInfo } from "./api.ts";
import { Logo } from "../../../ui/components/logo.tsx";
import { Link } from "../../../ui/components/ui.tsx";
import { clearNotices, dismiss, notify, useNotices } from "../../../ui/notices.ts";
import { AuditPage } from "./pages/audit.tsx";
import { CertificatesPage } from "./pages/certificates.tsx";
import { DashboardPage } from "./pages/dashboard.tsx";
import { DomainsPage } from "./pages/domains.tsx";
import { KeysPage } from "./pages/keys.tsx";
import { InvitationsPage } from "./pages/invitations.tsx";
import { SignInPage } from "./pages/signin.tsx";
import { TunnelsPage } from "./pages/tunnels.tsx";
import { UserPage } from "./pages/user.tsx";
import { UsersPage } from "./pages/users.tsx";
import { matchPath, usePath, type Page } from "./router.ts";
import { SessionContext } from "./session.ts";

type State =
  | { phase: "checking" }
  | { phase: "unreachable"; error: string }
  | { phase: "signed-out"; message?: string }
  | { phase: "signed-in"; me: Me; server?: ServerInfo };

export function App() {
  const [state, setState] = useState<State>({ phase: "checking" });

  const enter = (me: Me) => {
    setState({ phase: "signed-in", me });
    api
      .server()
      .then((server) => setState((s) => (s.phase === "signed-in" ? { ...s, server } : s)))
      .catch((err) => notify("error", `Could not read the server's public address: ${messageOf(err)}`));
  };

  const check = async () => {
    setState({ phase: "checking" });
    try {
      enter(await api.me());
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) setState({ phase: "signed-out" });
      else setState({ phase: "unreachable", error: messageOf(err) });
    }
  };

  useEffect(() => {
    whenSessionLost((why) =>
      setState((s) => (s.phase === "signed-in" ? { phase: "signed-out", message: `Your session has ended (${why}). Sign in again to continue.` } : s)),
    );
    void check();
  }, []);

  const signOut = async () => {
    try {
      await api.logout();
      clearNotices();
      setState({ phase: "signed-out", message: "You are signed out." });
    } catch (err) {
      notify("error", `Could not sign out: ${messageOf(err)}`);
    }
  };

  if (state.phase === "checking") return <p class="boot">Loading the burrow admin panel…</p>;
  if (state.phase === "unreachable") {
    return (
      <div class="boot" role="alert">
        <p>The panel cannot talk to the burrow server: {state.error}</p>
        <button type="button" class="btn" onClick={check}>
          Try again
        </button>
      </div>
    );
  }
  if (state.phase === "signed-out") return <SignInPage message={state.message} onSignedIn={enter} />;
  return (
    <SessionContext.Provider value={{ me: state.me, server: state.server }}>
      <Shell me={state.me} onSignOut={signOut} />
    </SessionContext.Provider>
  );
}

const NAV: { href: string; label: string; pages: Page["name"][] }[] = [
  { href: "/", label: "Dashboard", pages: ["dashboard"] },
  { href: "/users", label: "Users", pages: ["users", "user"] },
  { href: "/invitations", label: "Invitations", pages: ["invitations"] },
  { href: "/tunnels", label: "Tunnels", pages: ["tunnels"] },
  { href: "/domains", label: "Subdomains", pages: ["domains"] },
  { href: "/certificates", label: "HTTPS", pages: ["certificates"] },
  { href: "/audit", label: "Audit", pages: ["audit"] },
  { href: "/keys", label: "API keys", pages: ["keys"] },
];

function Shell(props: { me: Me; onSignOut(): void }) {
  const path = usePath();
  const page = matchPath(path);
  const first = useRef(true);

  // after moving to another page, focus its heading: keyboard and screen reader users start there
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    window.scrollTo(0, 0);
    document.querySelector<HTMLElement>("main h1")?.focus();
  }, [path]);

  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href="/" class="brand" aria-label="burrow admin, dashboard">
          <Logo /> <span>burrow</span>
          <span class="brand-sub">admin</span>
        </Link>
        <nav class="nav" aria-label="Main">
          {NAV.map((item) => (
            <Link key={item.href} href={item.href} aria-current={item.pages.includes(page.name) ? "page" : undefined}>
              {item.label}
            </Link>
          ))}
        </nav>
        <div class="who">
          <span class="who-name" data-testid="current-user" title="Signed in as">
            <span class="avatar" aria-hidden="true">
              {props.me.username.slice(0, 1).toUpperCase()}
            </span>
            <span class="sr-only">Signed in as </span>
            {props.me.username}
          </span>
          <button type="button" class="btn ghost small" onClick={props.onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <Notices />
      <main id="main" tabIndex={-1}>
        <PageView page={page} />
      </main>
      <footer class="foot">burrow admin · all dates and times are UTC · 1 KB = 1024 bytes</footer>
    </div>
  );
}

function PageView({ page }: { page: Page }) {
  switch (page.name) {
    case "dashboard":
      return <DashboardPage />;
    case "users":
      return <UsersPage />;
    case "user":
      return <UserPage id={page.id} />;
    case "domains":
      return <DomainsPage />;
    case "tunnels":
      return <TunnelsPage />;
    case "certificates":
      return <CertificatesPage />;
    case "audit":
      return <AuditPage />;
    case "keys":
      return <KeysPage />;
    case "invitations":
      return <InvitationsPage />;
    case "missing":
      return (
        <>
          <h1 tabIndex={-1}>Page not found</h1>
          <p>
            There is no panel page at <code>{location.pathname}</code>. <Link href="/">Go to the dashboard</Link>.
          </p>
        </>
      );
  }
}

function Notices() {
  const notices = useNotices();
  return (
    <div class="notices" aria-live="polite">
      {notices.map((n) => (
        <div key={n.id} class={`notice ${n.kind}`} role={n.kind === "error" ? "alert" : "status"}>
          <span>{n.text}</span>
          <button type="button" class="icon-btn" aria-label="Dismiss" onClick={() => dismiss(n.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
