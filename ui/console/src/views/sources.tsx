// One knowledge base's sources (docs/sources.md): add a folder, Git repository, website or S3
// source, sync it now, read its runs with their counts, delete it.
import { useState } from "preact/hooks";
import { enc, type Api } from "../api";
import {
  ActionButton,
  ActionForm,
  Badge,
  Crumbs,
  DataTable,
  ErrorBox,
  formatTime,
  Notice,
  RefreshButton,
  Section,
  SelectField,
  SubmitButton,
  TextField,
  useAction,
  useFields,
  useLoad,
} from "../components";

type Kind = "folder" | "git" | "website" | "s3";

interface Counts {
  seen: number;
  added: number;
  changed: number;
  unchanged: number;
  deleted: number;
  failed: number;
  requeued: number;
}

interface Run {
  run_id: string;
  trigger: string;
  caller: string;
  status: string;
  started_at: string;
  finished_at?: string | null;
  duration_ms?: number | null;
  counts: Counts;
  failures: { name: string; reason: string }[];
  error?: string | null;
  task_ids: string[];
  links?: { self: string };
}

interface Source {
  source_id: string;
  name: string;
  kind: Kind;
  settings: Record<string, unknown>;
  schedule_minutes?: number | null;
  next_sync_at?: string | null;
  last_run?: { run_id: string; status: string; finished_at?: string | null; counts: Counts } | null;
}

const MAIN_FIELD: Record<Kind, { key: string; label: string; hint: string }> = {
  folder: { key: "path", label: "Folder", hint: "a folder inside CITEGATE_LOCAL_INGEST_ROOT (local runtime)" },
  git: { key: "url", label: "Clone URL", hint: "https://… (locally also file://… or a path)" },
  website: { key: "start_url", label: "Start URL", hint: "the crawl follows links under its folder" },
  s3: { key: "bucket", label: "Bucket", hint: "the bucket's name" },
};

const KINDS: [Kind, string][] = [
  ["folder", "Folder"],
  ["git", "Git repository"],
  ["website", "Website"],
  ["s3", "S3 prefix"],
];

export function countsText(c: Counts): string {
  const parts = [`${c.added} added`, `${c.changed} changed`, `${c.unchanged} unchanged`, `${c.deleted} deleted`];
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.requeued) parts.push(`${c.requeued} requeued`);
  return parts.join(", ");
}

function Runs({ api, base, source }: { api: Api; base: string; source: Source }) {
  const runs = useLoad(
    () => api.get<{ runs: Run[] }>(`${base}/sources/${enc(source.source_id)}/runs`),
    [api, base, source.source_id, source.last_run?.run_id],
  );
  return (
    <Section title={`Runs of ${source.name}`} actions={<RefreshButton onClick={runs.reload}>Refresh runs</RefreshButton>}>
      <ErrorBox error={runs.error} label="Could not list the runs" />
      <DataTable
        rows={runs.data?.runs}
        caption={`Sync runs of ${source.name}`}
        empty="No runs yet."
        columns={["Started", "Status", "Counts", "Duration", "By"]}
        row={(run) => (
          <tr key={run.run_id} class="run">
            <td>{formatTime(run.started_at)}</td>
            <td>
              <Badge value={run.status} />
              {run.error ? <div class="muted small">{run.error}</div> : null}
            </td>
            <td>
              {countsText(run.counts)}
              {run.failures.map((f) => (
                <div key={f.name} class="muted small">
                  {f.name}: {f.reason}
                </div>
              ))}
            </td>
            <td>{run.duration_ms != null ? `${(run.duration_ms / 1000).toFixed(1)} s` : ""}</td>
            <td>
              {run.trigger} {run.caller ? <span class="muted small">({run.caller})</span> : null}
            </td>
          </tr>
        )}
      />
    </Section>
  );
}

export function Sources({ api, kbId }: { api: Api; kbId: string }) {
  const base = `/v1/kb/${enc(kbId)}`;
  const sources = useLoad(() => api.get<{ sources: Source[] }>(`${base}/sources`), [api, kbId]);
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);
  const [shown, setShown] = useState<string | null>(null);
  const [kind, setKind] = useState<Kind>("folder");
  const form = useFields({ name: "", location: "", extra: "", schedule: "" });
  const field = MAIN_FIELD[kind];

  function add(): Promise<Source> {
    const { name, location, extra, schedule } = form.values;
    const settings: Record<string, unknown> = { kind, [field.key]: location.trim() };
    if (kind === "git" && extra.trim()) settings.ref = extra.trim();
    if (kind === "s3" && extra.trim()) settings.prefix = extra.trim();
    const body: Record<string, unknown> = { name: name.trim(), settings };
    if (schedule.trim()) body.schedule_minutes = Number(schedule);
    return api.post<Source>(`${base}/sources`, body);
  }

  const list = sources.data?.sources ?? [];
  const selected = list.find((s) => s.source_id === shown);
  return (
    <>
      <Crumbs
        trail={[
          ["Knowledge bases", "#/kbs"],
          [kbId, `#/kb/${enc(kbId)}`],
        ]}
        here="Sources"
      />
      <h1>Sources of {kbId}</h1>
      <ErrorBox error={sources.error} label="Could not list the sources" />
      <ErrorBox error={action.error} label="The action failed" />
      <Notice>{message}</Notice>

      <Section title="Add a source">
        <ActionForm
          class="grid-form"
          action={action}
          run={add}
          onDone={async (created) => {
            setMessage(`Added source ${created.name} (${created.source_id}).`);
            form.reset();
            await sources.reload();
          }}
        >
          <TextField id="source-name" label="Source name" required {...form.bind("name")} />
          <SelectField id="source-kind" label="Kind" value={kind} options={KINDS} onValue={(value) => setKind(value as Kind)} />
          <TextField
            id="source-location"
            label={field.label}
            required
            aria-describedby="source-location-help"
            {...form.bind("location")}
          />
          <span id="source-location-help" class="muted small">
            {field.hint}
          </span>
          {kind === "git" || kind === "s3" ? (
            <TextField
              id="source-extra"
              label={kind === "git" ? "Ref (branch, tag or commit)" : "Prefix"}
              {...form.bind("extra")}
            />
          ) : null}
          <TextField id="source-schedule" label="Sync every (minutes, optional)" type="number" min={5} {...form.bind("schedule")} />
          <div>
            <SubmitButton action={action}>Add source</SubmitButton>
          </div>
        </ActionForm>
      </Section>

      <Section title="Sources" actions={<RefreshButton onClick={sources.reload} />}>
        <DataTable
          rows={sources.data?.sources}
          caption={`Sources of ${kbId}`}
          empty="No sources yet."
          columns={["Source", "Kind", "Schedule", "Last run", "Actions"]}
          row={(s) => (
            <tr key={s.source_id}>
              <td>
                {s.name}
                <div class="muted small">
                  <code>{s.source_id}</code> {String(s.settings.path ?? s.settings.url ?? s.settings.start_url ?? s.settings.sitemap_url ?? s.settings.bucket ?? "")}
                </div>
              </td>
              <td>{s.kind}</td>
              <td>{s.schedule_minutes ? `every ${s.schedule_minutes} min` : "on demand"}</td>
              <td>
                {s.last_run ? (
                  <>
                    <Badge value={s.last_run.status} /> <span class="small">{countsText(s.last_run.counts)}</span>
                    <div class="muted small">{formatTime(s.last_run.finished_at)}</div>
                  </>
                ) : (
                  "never"
                )}
              </td>
              <td class="actions">
                <ActionButton
                  action={action}
                  aria-label={`Sync now ${s.name}`}
                  run={async () => {
                    // 202: the run is queued; the sync function does the work. Follow its link to the end.
                    let current = await api.post<Run>(`${base}/sources/${enc(s.source_id)}/sync`);
                    const link = current.links?.self ?? `${base}/sources/${enc(s.source_id)}/runs/${enc(current.run_id)}`;
                    while (current.status === "queued" || current.status === "running") {
                      setMessage(`Syncing ${s.name}: ${current.status}…`);
                      await new Promise((resolve) => setTimeout(resolve, 500));
                      current = await api.get<Run>(link);
                    }
                    return current;
                  }}
                  onDone={async (run) => {
                    setMessage(`Synced ${s.name}: ${run.status}, ${countsText(run.counts)}.`);
                    setShown(s.source_id);
                    await sources.reload();
                  }}
                >
                  Sync now
                </ActionButton>
                <button type="button" class="secondary" aria-label={`Runs of ${s.name}`} onClick={() => setShown(s.source_id)}>
                  Runs
                </button>
                <ActionButton
                  class="danger"
                  action={action}
                  aria-label={`Delete source ${s.name}`}
                  confirm={`Delete the source ${s.name} and the documents it brought?`}
                  run={() => api.delete<{ deleted: { documents: number } }>(`${base}/sources/${enc(s.source_id)}`)}
                  onDone={async (result) => {
                    setMessage(`Deleted source ${s.name} (${result.deleted.documents} documents).`);
                    if (shown === s.source_id) setShown(null);
                    await sources.reload();
                  }}
                >
                  Delete
                </ActionButton>
              </td>
            </tr>
          )}
        />
      </Section>
      {selected ? <Runs api={api} base={base} source={selected} /> : null}
    </>
  );
}
