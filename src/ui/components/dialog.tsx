/**
 * Modal dialogs on the browser's own <dialog>: it traps focus, closes on
 * Escape and gives focus back to whatever opened it.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useId, useRef, useState } from "preact/hooks";
import { messageOf } from "../errors.ts";
import { ErrorBox } from "./ui.tsx";

export function Modal(props: { title: string; onClose(): void; children: ComponentChildren; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current!;
    const opener = document.activeElement as HTMLElement | null;
    if (!dialog.open) dialog.showModal();
    return () => {
      if (dialog.open) dialog.close();
      // the dialog leaves the page with its component; hand focus back to what opened it
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return (
    <dialog
      ref={ref}
      class={`modal ${props.wide ? "wide" : ""}`}
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        props.onClose();
      }}
    >
      <header class="modal-head">
        <h2 id={titleId}>{props.title}</h2>
        <button type="button" class="icon-btn" aria-label="Close" onClick={props.onClose}>
          ×
        </button>
      </header>
      <div class="modal-body">{props.children}</div>
    </dialog>
  );
}

/**
 * "Are you sure?" with the consequence spelled out. Focus starts on Cancel;
 * a failure stays in the dialog, in the server's words.
 */
export function Confirm(props: {
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  onConfirm(): Promise<unknown>;
  onClose(): void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const confirm = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await props.onConfirm();
      props.onClose();
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };
  return (
    <Modal title={props.title} onClose={props.onClose}>
      <div class="confirm-text">{props.children}</div>
      {error && <ErrorBox title="The server refused" message={error} />}
      <div class="form-actions">
        <button type="button" class="btn" onClick={props.onClose} autofocus>
          Cancel
        </button>
        <button type="button" class="btn danger" onClick={confirm} disabled={busy}>
          {busy ? "Working…" : props.confirmLabel}
        </button>
      </div>
    </Modal>
  );
}
