// One knowledge base's sources (docs/sources.md): add a folder, Git repository, website or S3
// source, sync it now, read its runs with their counts, delete it.
import { useState } from "preact/hooks";
import { enc, type Api } from "../api";
import { Badge, ErrorBox, formatTime, Notice, Section, useAction, useLoad } from "../ui";

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
    <Section title={`Runs of ${source.name}`} actions={<button type="button" class="secondary" onClick={runs.reload}>Refresh runs</button>}>
      <ErrorBox error={runs.error} label="Could not list the runs" />
      {runs.data && runs.data.runs.length === 0 ? <p>No runs yet.</p> : null}
      {runs.data && runs.data.runs.length > 0 ? (
        <table>
          <caption class="sr-only">Sync runs of {source.name}</caption>
          <thead>
            <tr>
              <th scope="col">Started</th>
              <th scope="col">Status</th>
              <th scope="col">Counts</th>
              <th scope="col">Duration</th>
              <th scope="col">By</th>
            </tr>
          </thead>
          <tbody>
            {runs.data.runs.map((run) => (
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
            ))}
          </tbody>
        </table>
      ) : null}
    </Section>
  );
}

export function Sources({ api, kbId }: { api: Api; kbId: string }) {
  const base = `/v1/kb/${enc(kbId)}`;
  const sources = useLoad(() => api.get<{ sources: Source[] }>(`${base}/sources`), [api, kbId]);
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);
  const [shown, setShown] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [kind, setKind] = useState<Kind>("folder");
  const [location, setLocation] = useState("");
  const [extra, setExtra] = useState("");
  const [schedule, setSchedule] = useState("");
  const field = MAIN_FIELD[kind];

  async function add(event: Event) {
    event.preventDefault();
    const settings: Record<string, unknown> = { kind, [field.key]: location.trim() };
    if (kind === "git" && extra.trim()) settings.ref = extra.trim();
    if (kind === "s3" && extra.trim()) settings.prefix = extra.trim();
    const body: Record<string, unknown> = { name: name.trim(), settings };
    if (schedule.trim()) body.schedule_minutes = Number(schedule);
    const created = await action.run(() => api.post<Source>(`${base}/sources`, body));
    if (created) {
      setMessage(`Added source ${created.name} (${created.source_id}).`);
      setName("");
      setLocation("");
      setExtra("");
      setSchedule("");
      await sources.reload();
    }
  }

  const list = sources.data?.sources ?? [];
  const selected = list.find((s) => s.source_id === shown);
  return (
    <>
      <p class="crumbs">
        <a href="#/kbs">Knowledge bases</a> / <a href={`#/kb/${enc(kbId)}`}>{kbId}</a> / <span>Sources</span>
      </p>
      <h1>Sources of {kbId}</h1>
      <ErrorBox error={sources.error} label="Could not list the sources" />
      <ErrorBox error={action.error} label="The action failed" />
      {message ? <Notice>{message}</Notice> : null}

      <Section title="Add a source">
        <form class="grid-form" onSubmit={add}>
          <label for="source-name">Source name</label>
          <input id="source-name" required value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <label for="source-kind">Kind</label>
          <select id="source-kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value as Kind)}>
            <option value="folder">Folder</option>
            <option value="git">Git repository</option>
            <option value="website">Website</option>
            <option value="s3">S3 prefix</option>
          </select>
          <label for="source-location">{field.label}</label>
          <input
            id="source-location"
            required
            value={location}
            aria-describedby="source-location-help"
            onInput={(e) => setLocation((e.target as HTMLInputElement).value)}
          />
          <span id="source-location-help" class="muted small">
            {field.hint}
          </span>
          {kind === "git" || kind === "s3" ? (
            <>
              <label for="source-extra">{kind === "git" ? "Ref (branch, tag or commit)" : "Prefix"}</label>
              <input id="source-extra" value={extra} onInput={(e) => setExtra((e.target as HTMLInputElement).value)} />
            </>
          ) : null}
          <label for="source-schedule">Sync every (minutes, optional)</label>
          <input
            id="source-schedule"
            type="number"
            min={5}
            value={schedule}
            onInput={(e) => setSchedule((e.target as HTMLInputElement).value)}
          />
          <div>
            <button type="submit" disabled={action.busy}>
              Add source
            </button>
          </div>
        </form>
      </Section>

      <Section title="Sources" actions={<button type="button" class="secondary" onClick={sources.reload}>Refresh</button>}>
        {sources.data && list.length === 0 ? <p>No sources yet.</p> : null}
        {list.length > 0 ? (
          <table>
            <caption class="sr-only">Sources of {kbId}</caption>
            <thead>
              <tr>
                <th scope="col">Source</th>
                <th scope="col">Kind</th>
                <th scope="col">Schedule</th>
                <th scope="col">Last run</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((s) => (
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
                    <button
                      type="button"
                      disabled={action.busy}
                      aria-label={`Sync now ${s.name}`}
                      onClick={async () => {
                        // 202: the run is queued; the sync function does the work. Follow its link to the end.
                        const run = await action.run(async () => {
                          let current = await api.post<Run>(`${base}/sources/${enc(s.source_id)}/sync`);
                          const link = current.links?.self ?? `${base}/sources/${enc(s.source_id)}/runs/${enc(current.run_id)}`;
                          while (current.status === "queued" || current.status === "running") {
                            setMessage(`Syncing ${s.name}: ${current.status}…`);
                            await new Promise((resolve) => setTimeout(resolve, 500));
                            current = await api.get<Run>(link);
                          }
                          return current;
                        });
                        if (run) {
                          setMessage(`Synced ${s.name}: ${run.status}, ${countsText(run.counts)}.`);
                          setShown(s.source_id);
                          await sources.reload();
                        }
                      }}
                    >
                      Sync now
                    </button>
                    <button type="button" class="secondary" aria-label={`Runs of ${s.name}`} onClick={() => setShown(s.source_id)}>
                      Runs
                    </button>
                    <button
                      type="button"
                      class="danger"
                      disabled={action.busy}
                      aria-label={`Delete source ${s.name}`}
                      onClick={async () => {
                        if (!confirm(`Delete the source ${s.name} and the documents it brought?`)) return;
                        const result = await action.run(() =>
                          api.delete<{ deleted: { documents: number } }>(`${base}/sources/${enc(s.source_id)}`),
                        );
                        if (result) {
                          setMessage(`Deleted source ${s.name} (${result.deleted.documents} documents).`);
                          if (shown === s.source_id) setShown(null);
                          await sources.reload();
                        }
                      }}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </Section>
      {selected ? <Runs api={api} base={base} source={selected} /> : null}
    </>
  );
}
