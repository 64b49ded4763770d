/**
 * The signed-in layout the admin panel and the portal share: a skip link,
 * the top bar (brand, main navigation, who is signed in, sign out), the
 * notices, the page, a footer. After moving to another page, its heading
 * takes the focus: keyboard and screen reader users start there.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import { usePath } from "../navigation.ts";
import { dismiss, useNotices } from "../notices.ts";
import { Logo } from "./logo.tsx";
import { Link } from "./ui.tsx";

export interface NavItem {
  href: string;
  label: string;
  current: boolean;
}

export function Shell(props: { brand: { label: string; sub?: string }; nav: NavItem[]; username: string; onSignOut(): void; footer: string; children: ComponentChildren }) {
  const path = usePath();
  const first = useRef(true);
  const nav = useRef<HTMLElement>(null);

  // the bar's links scroll when there are more than it is wide: the current page's stays in sight
  useEffect(() => {
    nav.current?.querySelector<HTMLElement>('[aria-current="page"]')?.scrollIntoView({ block: "nearest", inline: "nearest" });
  }, [path]);

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
        <Link href="/" class="brand" aria-label={props.brand.label}>
          <Logo /> <span>burrow</span>
          {props.brand.sub && <span class="brand-sub">{props.brand.sub}</span>}
        </Link>
        <nav class="nav" aria-label="Main" ref={nav}>
          {props.nav.map((item) => (
            <Link key={item.href} href={item.href} aria-current={item.current ? "page" : undefined}>
              {item.label}
            </Link>
          ))}
        </nav>
        <div class="who">
          <span class="who-name" data-testid="current-user" title="Signed in as">
            <span class="avatar" aria-hidden="true">
              {props.username.slice(0, 1).toUpperCase()}
            </span>
            <span class="sr-only">Signed in as </span>
            {props.username}
          </span>
          <button type="button" class="btn ghost small" onClick={props.onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <Notices />
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
      <footer class="foot">{props.footer}</footer>
    </div>
  );
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
