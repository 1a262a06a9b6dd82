// Feedback and improvement tasks (/admin/feedback): what readers and agents reported, merged by
// problem, with how many reports and from which callers; close an item with a resolution.
import { useState } from "preact/hooks";
import { enc, type Api } from "../api";
import {
  ActionForm,
  Badge,
  ErrorBox,
  formatTime,
  Notice,
  RefreshButton,
  Section,
  SelectField,
  SubmitButton,
  TextField,
  useAction,
  useLoad,
} from "../components";

interface FeedbackRecord {
  recordId: string;
  kind: "feedback" | "improvement_task";
  status: "open" | "closed";
  eventType: string;
  count: number;
  firstSeen: string;
  lastSeen: string;
  callers: Record<string, number>;
  title?: string | null;
  question?: string | null;
  description?: string | null;
  issueUrl?: string | null;
  resolution?: string | null;
  closedBy?: string | null;
  reports?: { callerType: string; callerId?: string; at: string; comment?: string | null }[];
}

export function Feedback({ api }: { api: Api }) {
  const [kind, setKind] = useState("");
  const [status, setStatus] = useState("open");
  const params = new URLSearchParams({ limit: "200" });
  if (kind) params.set("kind", kind);
  if (status) params.set("status", status);
  const list = useLoad(() => api.get<{ records: FeedbackRecord[] }>(`/admin/feedback?${params}`), [api, kind, status]);
  const close = useAction();
  const [resolutions, setResolutions] = useState<Record<string, string>>({});
  const [closed, setClosed] = useState<string | null>(null);

  return (
    <>
      <h1>Feedback and improvement tasks</h1>
      <Section title="Filter" actions={<RefreshButton onClick={list.reload} />}>
        <div class="filters">
          <SelectField
            id="fb-kind"
            label="Kind"
            value={kind}
            onValue={setKind}
            options={[
              ["", "all"],
              ["feedback", "feedback"],
              ["improvement_task", "improvement tasks"],
            ]}
          />
          <SelectField
            id="fb-status"
            label="Status"
            value={status}
            onValue={setStatus}
            options={[
              ["open", "open"],
              ["closed", "closed"],
              ["", "all"],
            ]}
          />
        </div>
      </Section>
      <Section title={`Items${list.data ? ` (${list.data.records.length})` : ""}`}>
        <ErrorBox error={list.error} label="Could not list feedback" />
        <ErrorBox error={close.error} label="Could not close the item" />
        {closed ? <Notice>Closed “{closed}”.</Notice> : null}
        {list.data && list.data.records.length === 0 ? <p>Nothing here.</p> : null}
        <ul class="records">
          {(list.data?.records ?? []).map((r) => {
            const label = r.title || r.question || r.eventType;
            return (
              <li key={r.recordId} class="record">
                <h3>
                  {label} <Badge value={r.status} /> <Badge value={r.kind} />
                </h3>
                <p class="muted small">
                  <span data-testid="count">{r.count}</span> report{r.count === 1 ? "" : "s"} · {r.eventType} · first{" "}
                  {formatTime(r.firstSeen)} · last {formatTime(r.lastSeen)}
                </p>
                <p>
                  Callers:{" "}
                  {Object.entries(r.callers)
                    .map(([caller, n]) => `${caller} (${n})`)
                    .join(", ")}
                </p>
                {r.question && r.question !== label ? <p>Question: {r.question}</p> : null}
                {r.description ? <p>{r.description}</p> : null}
                {r.issueUrl ? (
                  <p>
                    Issue: <a href={r.issueUrl}>{r.issueUrl}</a>
                  </p>
                ) : null}
                {r.status === "closed" ? (
                  <p class="muted">
                    Closed by {r.closedBy ?? "?"}
                    {r.resolution ? `: ${r.resolution}` : ""}
                  </p>
                ) : (
                  <ActionForm
                    class="inline-form"
                    action={close}
                    run={() => {
                      const resolution = (resolutions[r.recordId] ?? "").trim();
                      return api.post(`/admin/feedback/${enc(r.recordId)}/close`, resolution ? { resolution } : {});
                    }}
                    onDone={async () => {
                      setClosed(label);
                      await list.reload();
                    }}
                  >
                    <TextField
                      id={`res-${r.recordId}`}
                      label="Resolution"
                      value={resolutions[r.recordId] ?? ""}
                      onValue={(value) => setResolutions({ ...resolutions, [r.recordId]: value })}
                    />
                    <SubmitButton action={close} aria-label={`Close “${label}”`}>
                      Close
                    </SubmitButton>
                  </ActionForm>
                )}
              </li>
            );
          })}
        </ul>
      </Section>
    </>
  );
}
