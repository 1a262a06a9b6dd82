// The frame of a screen: titled sections, the breadcrumb trail, the Refresh button.
import { Fragment, type ComponentChildren } from "preact";

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="panel" aria-label={title}>
      <div class="panel-head">
        <h2>{title}</h2>
        {actions ? <div class="panel-actions">{actions}</div> : null}
      </div>
      {children}
    </section>
  );
}

/** Where this screen is: the links up (label, href), then this screen's own name. */
export function Crumbs({ trail, here }: { trail: [string, string][]; here: string }) {
  return (
    <p class="crumbs">
      {trail.map(([label, href]) => (
        <Fragment key={href}>
          <a href={href}>{label}</a>
          {" / "}
        </Fragment>
      ))}
      <span>{here}</span>
    </p>
  );
}

export function RefreshButton({ onClick, children = "Refresh" }: { onClick: () => unknown; children?: ComponentChildren }) {
  return (
    <button type="button" class="secondary" onClick={() => onClick()}>
      {children}
    </button>
  );
}
