// One knowledge base: its documents, uploads (presigned PUT with progress, then ingestion by
// s3_key), live task status, reindex, delete, and a link to each document's chunks.
import { useEffect, useRef, useState } from "preact/hooks";
import { enc, putWithProgress, type Api, type DocumentRecord, type KnowledgeBase, type Task } from "../api";
import {
  ActionButton,
  Badge,
  Crumbs,
  DataTable,
  ErrorBox,
  formatBytes,
  formatTime,
  Notice,
  RefreshButton,
  Section,
  useAction,
  useLoad,
} from "../components";
import { approval } from "./kbs";

interface Upload {
  key: number;
  name: string;
  size: number;
  phase: "waiting" | "uploading" | "ingesting" | Task["status"];
  progress: number;
  taskId?: string;
  counts?: Task["counts"];
  error?: unknown;
}

const TERMINAL = new Set(["succeeded", "failed"]);
const POLL_MS = 1000;
const PARALLEL = 3;

interface Upload201 {
  url: string;
  method: string;
  headers: Record<string, string>;
  s3_key: string;
  max_bytes: number;
}

export function KnowledgeBaseDetail({ api, kbId }: { api: Api; kbId: string }) {
  const base = `/v1/kb/${enc(kbId)}`;
  const kb = useLoad(() => api.get<KnowledgeBase>(base), [api, kbId]);
  const docs = useLoad(() => api.get<{ documents: DocumentRecord[] }>(`${base}/documents`), [api, kbId]);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [dragging, setDragging] = useState(false);
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);
  const counter = useRef(0);
  const fileInput = useRef<HTMLInputElement>(null);

  const update = (key: number, change: Partial<Upload>) =>
    setUploads((all) => all.map((u) => (u.key === key ? { ...u, ...change } : u)));

  async function uploadOne(file: File, key: number): Promise<void> {
    try {
      const mime = file.type || undefined;
      const upload = await api.post<Upload201>(`${base}/uploads`, { source_name: file.name, mime_type: mime });
      if (file.size > upload.max_bytes) {
        throw new Error(`${file.name} is ${formatBytes(file.size)}, over the ${formatBytes(upload.max_bytes)} limit`);
      }
      update(key, { phase: "uploading" });
      await putWithProgress(upload.url, upload.headers, file, (progress) => update(key, { progress }));
      update(key, { phase: "ingesting" });
      const accepted = await api.post<{ task_id: string }>(`${base}/documents`, {
        s3_key: upload.s3_key,
        source_name: file.name,
        mime_type: mime,
      });
      update(key, { phase: "queued", taskId: accepted.task_id });
      void docs.reload();
    } catch (error) {
      update(key, { phase: "failed", error });
    }
  }

  async function addFiles(files: FileList | File[]) {
    const list = Array.from(files);
    if (list.length === 0) return;
    const added = list.map((file) => ({ file, key: ++counter.current }));
    setUploads((all) => [
      ...added.map(({ file, key }) => ({ key, name: file.name, size: file.size, phase: "waiting" as const, progress: 0 })),
      ...all,
    ]);
    // A few at a time: many large PUTs at once would only share the same bandwidth.
    const queue = [...added];
    await Promise.all(
      Array.from({ length: Math.min(PARALLEL, queue.length) }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) await uploadOne(next.file, next.key);
      }),
    );
  }

  // Task status, live: poll every task that has not finished.
  const pending = uploads.filter((u) => u.taskId && !TERMINAL.has(u.phase)).map((u) => `${u.key}:${u.taskId}`);
  useEffect(() => {
    if (pending.length === 0) return;
    const timer = setTimeout(async () => {
      let finished = false;
      await Promise.all(
        pending.map(async (entry) => {
          const [key, taskId] = entry.split(":");
          try {
            const task = await api.get<Task>(`/v1/tasks/${enc(taskId)}`);
            update(Number(key), {
              phase: task.status,
              counts: task.counts,
              error: task.status === "failed" ? new Error(task.error || "the task failed") : undefined,
            });
            finished ||= TERMINAL.has(task.status);
          } catch (error) {
            update(Number(key), { error });
          }
        }),
      );
      if (finished) void docs.reload();
    }, POLL_MS);
    return () => clearTimeout(timer);
  }, [pending.join(","), uploads]);

  // Documents still queued (a reindex, an upload from elsewhere) refresh until they settle.
  const queued = (docs.data?.documents ?? []).some((d) => d.status === "queued");
  useEffect(() => {
    if (!queued) return;
    const timer = setTimeout(() => void docs.reload(), POLL_MS * 2);
    return () => clearTimeout(timer);
  }, [queued, docs.data]);

  const current = kb.data;
  return (
    <>
      <Crumbs trail={[["Knowledge bases", "#/kbs"]]} here={kbId} />
      <h1>
        {current?.name ?? kbId} {current ? <Badge value={current.status} /> : null}
      </h1>
      <ErrorBox error={kb.error} label="Could not load the knowledge base" />
      <ErrorBox error={action.error} label="The action failed" />
      <Notice>{message}</Notice>
      {current ? (
        <div class="toolbar">
          <ActionButton
            action={action}
            run={() => api.patch(base, { status: approval(current.status).next })}
            onDone={async () => {
              setMessage(`The knowledge base is now ${approval(current.status).next}.`);
              await kb.reload();
            }}
          >
            {approval(current.status).verb}
          </ActionButton>
          <ActionButton
            class="secondary"
            action={action}
            run={() => api.post<{ task_id: string; documents: number }>(`${base}/reindex`)}
            onDone={async (result) => {
              setMessage(`Reindexing ${result.documents} document(s): task ${result.task_id}.`);
              await docs.reload();
            }}
          >
            Reindex all
          </ActionButton>
          <a class="button secondary" href={`#/kb/${enc(kbId)}/sources`}>
            Sources
          </a>
          <a class="button secondary" href={`#/playground?kb=${enc(kbId)}`}>
            Open in playground
          </a>
        </div>
      ) : null}

      <Section title="Upload documents">
        <div
          class={`dropzone${dragging ? " dragging" : ""}`}
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(e) => {
            e.preventDefault();
            setDragging(false);
            if (e.dataTransfer?.files) void addFiles(e.dataTransfer.files);
          }}
        >
          <p>Drop files here (Markdown, text, HTML, PDF), or</p>
          <button type="button" onClick={() => fileInput.current?.click()}>
            Choose files
          </button>
          <input
            id="file-input"
            ref={fileInput}
            class="hidden-file"
            tabIndex={-1}
            aria-hidden="true"
            type="file"
            multiple
            accept=".md,.markdown,.txt,.html,.htm,.pdf,text/markdown,text/plain,text/html,application/pdf"
            onChange={(e) => {
              const input = e.target as HTMLInputElement;
              if (input.files) void addFiles(Array.from(input.files));
              input.value = "";
            }}
          />
        </div>
        {uploads.length > 0 ? (
          <ul class="uploads" aria-label="Uploads" aria-live="polite">
            {uploads.map((u) => (
              <li key={u.key} class="upload" data-phase={u.phase}>
                <span class="upload-name">{u.name}</span>
                <span class="muted small">{formatBytes(u.size)}</span>
                <progress max={1} value={u.progress} aria-label={`Upload of ${u.name}`} />
                <Badge value={u.phase} />
                {u.counts && u.phase === "succeeded" ? (
                  <span class="muted small">
                    {u.counts.parents} parents, {u.counts.children} chunks
                  </span>
                ) : null}
                {u.taskId ? <code class="small">{u.taskId}</code> : null}
                {u.error ? <ErrorBox error={u.error} label={`${u.name}`} /> : null}
              </li>
            ))}
          </ul>
        ) : null}
      </Section>

      <Section title="Documents" actions={<RefreshButton onClick={docs.reload} />}>
        <ErrorBox error={docs.error} label="Could not list the documents" />
        <DataTable
          rows={docs.data?.documents}
          caption={`Documents of ${kbId}`}
          empty="No documents yet."
          columns={["Source", "Status", "Parents / chunks", "Size", "Updated", "Actions"]}
          row={(d) => (
            <tr key={d.document_id}>
              <td>
                <a href={`#/kb/${enc(kbId)}/doc/${enc(d.document_id)}`}>{d.source_name}</a>
                {d.title && d.title !== d.source_name ? <div class="muted small">{d.title}</div> : null}
              </td>
              <td>
                <Badge value={d.status} />
              </td>
              <td>
                {d.counts?.parents ?? 0} / {d.counts?.children ?? 0}
              </td>
              <td>{formatBytes(d.size_bytes)}</td>
              <td>{formatTime(d.updated_at)}</td>
              <td>
                <ActionButton
                  class="danger"
                  action={action}
                  aria-label={`Delete ${d.source_name}`}
                  confirm={`Delete ${d.source_name} and all its chunks?`}
                  run={() => api.delete<{ deleted: { chunks: number } }>(`${base}/documents/${enc(d.document_id)}`)}
                  onDone={async (result) => {
                    setMessage(`Deleted ${d.source_name} (${result.deleted.chunks} chunks).`);
                    await docs.reload();
                  }}
                >
                  Delete
                </ActionButton>
              </td>
            </tr>
          )}
        />
        {current ? <p class="muted small">Created {formatTime(current.created_at)}.</p> : null}
      </Section>
    </>
  );
}
