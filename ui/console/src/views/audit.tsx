// The audit log (/admin/audit): one record per call. Caller and time are filtered by the API;
// route and decision are filtered here, over the records it returned.
import { useState } from "preact/hooks";
import type { Api } from "../api";
import { Badge, DataTable, ErrorBox, formatTime, Section, SelectField, TextField, useLoad } from "../components";

interface AuditRecord {
  request_id: string;
  timestamp: string;
  caller_type: string;
  caller_id: string;
  route: string;
  tool: string | null;
  decision: string;
  reason: string | null;
  status: number | null;
  knowledge_bases: string[];
  query: string | null;
  latency_ms: number | null;
}

const DECISIONS: [string, string][] = [
  ["", "any"],
  ["allow", "allow"],
  ["deny", "deny"],
  ["error", "error"],
  ["pending", "pending"],
];

// <input type="datetime-local"> gives local time without a zone; the API compares ISO timestamps.
function toIso(local: string): string {
  return local ? new Date(local).toISOString() : "";
}

export function Audit({ api }: { api: Api }) {
  const [applied, setApplied] = useState({ caller: "", since: "", until: "", limit: "200", route: "", decision: "" });
  const params = new URLSearchParams({ limit: applied.limit || "200" });
  // The API names a caller type:id as its records show it; anonymous readers are anonymous:anonymous.
  const caller = applied.caller.trim();
  if (caller) params.set("caller", caller === "anonymous" ? "anonymous:anonymous" : caller);
  if (applied.since) params.set("since", toIso(applied.since));
  if (applied.until) params.set("until", toIso(applied.until));
  const list = useLoad(() => api.get<{ records: AuditRecord[] }>(`/admin/audit?${params}`), [api, params.toString()]);
  const routeNeedle = applied.route.trim().toLowerCase();
  const records = (list.data?.records ?? []).filter(
    (r) => (!routeNeedle || r.route.toLowerCase().includes(routeNeedle)) && (!applied.decision || r.decision === applied.decision),
  );

  return (
    <>
      <h1>Audit log</h1>
      <Section title="Filter">
        <form
          class="filters fields"
          onSubmit={(event) => {
            event.preventDefault();
            // Read the fields as submitted (date inputs do not always report every edit as input).
            const data = new FormData(event.currentTarget as HTMLFormElement);
            const next = { ...applied };
            for (const name of Object.keys(next) as (keyof typeof next)[]) next[name] = String(data.get(name) ?? "");
            setApplied(next);
            if (JSON.stringify(next) === JSON.stringify(applied)) void list.reload();
          }}
        >
          <div class="field">
            <TextField
              id="au-caller"
              label="Caller"
              placeholder="agent:research-bot"
              aria-describedby="au-caller-help"
              name="caller"
              defaultValue={applied.caller}
            />
            <span id="au-caller-help" class="muted small">
              type:id as in the Caller column, or anonymous
            </span>
          </div>
          <div class="field">
            <TextField id="au-route" label="Route contains" placeholder="/v1/kb" name="route" defaultValue={applied.route} />
          </div>
          <div class="field">
            <SelectField
              id="au-decision"
              label="Decision"
              name="decision"
              defaultValue={applied.decision}
              options={DECISIONS}
            />
          </div>
          <div class="field">
            <TextField id="au-since" label="Since" type="datetime-local" name="since" defaultValue={applied.since} />
          </div>
          <div class="field">
            <TextField id="au-until" label="Until" type="datetime-local" name="until" defaultValue={applied.until} />
          </div>
          <div class="field">
            <TextField id="au-limit" label="Limit" type="number" min={1} max={1000} name="limit" defaultValue={applied.limit} />
          </div>
          <button type="submit">Apply</button>
        </form>
      </Section>
      <Section title={`Records${list.data ? ` (${records.length} of ${list.data.records.length})` : ""}`}>
        <ErrorBox error={list.error} label="Could not read the audit log" />
        <DataTable
          class="audit"
          rows={list.data ? records : undefined}
          caption="Audit records, newest first"
          empty="No records match."
          columns={["Time", "Caller", "Route", "Decision", "Status", "Knowledge bases", "Query", "ms"]}
          row={(r) => (
            <tr key={r.request_id} title={`request ${r.request_id}`}>
              <td>{formatTime(r.timestamp)}</td>
              <td>
                <code>
                  {r.caller_type}:{r.caller_id}
                </code>
              </td>
              <td>
                <code>{r.route}</code>
              </td>
              <td>
                <Badge value={r.decision} />
                {r.reason ? <div class="muted small">{r.reason}</div> : null}
              </td>
              <td>{r.status ?? ""}</td>
              <td>{r.knowledge_bases.join(", ")}</td>
              <td class="clip">{r.query ?? ""}</td>
              <td>{r.latency_ms ?? ""}</td>
            </tr>
          )}
        />
      </Section>
    </>
  );
}
