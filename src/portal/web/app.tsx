/**
 * The shell: checks the session, shows sign-in or the signed-in layout
 * (header with the user, navigation, notices) and the page for the address
 * bar's path. The device page keeps its code through a sign-in.
 */
import { useEffect, useState } from "preact/hooks";
import { Link } from "../../ui/components/ui.tsx";
import { clearNotices, notify } from "../../ui/notices.ts";
import { Shell } from "../../ui/components/shell.tsx";
import { api, ApiError, messageOf, whenSessionLost, type Me } from "./api.ts";
import { AccountPage } from "./pages/account.tsx";
import { DevicePage } from "./pages/device.tsx";
import { DevicesPage } from "./pages/devices.tsx";
import { OverviewPage } from "./pages/overview.tsx";
import { InvitePage } from "./pages/invite.tsx";
import { WebhooksPage } from "./pages/webhooks.tsx";
import { SignInPage } from "./pages/signin.tsx";
import { matchPath, navigate, usePath, type Page } from "./router.ts";
import { MeContext } from "./session.ts";

type State = { phase: "checking" } | { phase: "unreachable"; error: string } | { phase: "signed-out"; message?: string } | { phase: "signed-in"; me: Me };

export function App() {
  const [state, setState] = useState<State>({ phase: "checking" });
  const path = usePath();

  const check = async (message?: string) => {
    try {
      setState({ phase: "signed-in", me: await api.me() });
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) setState({ phase: "signed-out", message });
      else setState({ phase: "unreachable", error: messageOf(err) });
    }
  };

  useEffect(() => {
    whenSessionLost((why) => setState((s) => (s.phase === "signed-in" ? { phase: "signed-out", message: `Your session has ended (${why}). Sign in again to continue.` } : s)));
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

  if (state.phase === "checking") return <p class="boot">Loading…</p>;
  if (state.phase === "unreachable") {
    return (
      <div class="boot" role="alert">
        <p>This page cannot talk to the burrow server: {state.error}</p>
        <button type="button" class="btn" onClick={() => check()}>
          Try again
        </button>
      </div>
    );
  }
  // an invitation is opened by someone who has no account yet: its page stands alone
  if (matchPath(path).name === "invite") {
    return <InvitePage signedInAs={state.phase === "signed-in" ? state.me.user.username : undefined} onSignOut={signOut} onJoined={() => check().then(() => navigate("/devices"))} />;
  }
  if (state.phase === "signed-out") {
    const forDevice = matchPath(path).name === "device";
    return <SignInPage message={state.message ?? (forDevice ? "Sign in to approve the device that is logging in." : undefined)} onSignedIn={() => check()} />;
  }
  const reloadMe = () => api.me().then((me) => setState({ phase: "signed-in", me }), () => {});
  return (
    <MeContext.Provider value={{ me: state.me, reload: reloadMe }}>
      <PortalShell me={state.me} onSignOut={signOut} />
    </MeContext.Provider>
  );
}

const NAV: { href: string; label: string; pages: Page["name"][] }[] = [
  { href: "/", label: "Overview", pages: ["overview"] },
  { href: "/devices", label: "Devices", pages: ["devices", "device"] },
  { href: "/webhooks", label: "Webhooks", pages: ["webhooks"] },
  { href: "/account", label: "Account", pages: ["account"] },
];

function PortalShell(props: { me: Me; onSignOut(): void }) {
  const page = matchPath(usePath());
  return (
    <Shell
      brand={{ label: "burrow, overview" }}
      nav={NAV.map((item) => ({ href: item.href, label: item.label, current: item.pages.includes(page.name) }))}
      username={props.me.user.username}
      onSignOut={props.onSignOut}
      footer="burrow · all dates and times are UTC · 1 KB = 1024 bytes"
    >
      <PageView page={page} />
    </Shell>
  );
}

function PageView({ page }: { page: Page }) {
  switch (page.name) {
    case "overview":
      return <OverviewPage />;
    case "devices":
      return <DevicesPage />;
    case "account":
      return <AccountPage />;
    case "webhooks":
      return <WebhooksPage />;
    case "device":
      return <DevicePage />;
    case "invite":
      return null; // shown by App, signed in or not
    case "missing":
      return (
        <>
          <h1 tabIndex={-1}>Page not found</h1>
          <p>
            There is no page at <code>{location.pathname}</code>. <Link href="/">Go to the overview</Link>.
          </p>
        </>
      );
  }
}
