// Knowledge bases: list, create, approve and unapprove (PATCH status), open one.
import { useState } from "preact/hooks";
import { enc, type Api, type KnowledgeBase } from "../api";
import { Badge, ErrorBox, formatTime, Notice, Section, useAction, useLoad } from "../ui";

export function KnowledgeBases({ api }: { api: Api }) {
  const list = useLoad(() => api.get<{ knowledge_bases: KnowledgeBase[] }>("/v1/kb"), [api]);
  const create = useAction();
  const toggle = useAction();
  const [name, setName] = useState("");
  const [kbId, setKbId] = useState("");
  const [description, setDescription] = useState("");
  const [created, setCreated] = useState<string | null>(null);

  const kbs = list.data?.knowledge_bases ?? [];
  return (
    <>
      <h1>Knowledge bases</h1>
      <Section title="All knowledge bases" actions={<button type="button" class="secondary" onClick={list.reload}>Refresh</button>}>
        <ErrorBox error={list.error} label="Could not list knowledge bases" />
        <ErrorBox error={toggle.error} label="Could not change the status" />
        {list.loading && !list.data ? <p aria-live="polite">Loading…</p> : null}
        {list.data && kbs.length === 0 ? <p>No knowledge base yet: create one below.</p> : null}
        {kbs.length > 0 ? (
          <table>
            <caption class="sr-only">Knowledge bases</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Status</th>
                <th scope="col">Documents</th>
                <th scope="col">Updated</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {kbs.map((kb) => (
                <tr key={kb.kb_id}>
                  <td>
                    <a href={`#/kb/${enc(kb.kb_id)}`}>{kb.name}</a>
                    {kb.description ? <div class="muted small">{kb.description}</div> : null}
                  </td>
                  <td>
                    <code>{kb.kb_id}</code>
                  </td>
                  <td>
                    <Badge value={kb.status} />
                  </td>
                  <td>{kb.document_count}</td>
                  <td>{formatTime(kb.updated_at)}</td>
                  <td>
                    <button
                      type="button"
                      class="secondary"
                      disabled={toggle.busy}
                      aria-label={`${kb.status === "approved" ? "Unapprove" : "Approve"} ${kb.name}`}
                      onClick={async () => {
                        const status = kb.status === "approved" ? "working" : "approved";
                        if (await toggle.run(() => api.patch(`/v1/kb/${enc(kb.kb_id)}`, { status }))) await list.reload();
                      }}
                    >
                      {kb.status === "approved" ? "Unapprove" : "Approve"}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </Section>
      <Section title="Create a knowledge base">
        <form
          class="grid-form"
          onSubmit={async (event) => {
            event.preventDefault();
            const body: Record<string, string> = { name: name.trim() };
            if (kbId.trim()) body.kb_id = kbId.trim();
            if (description.trim()) body.description = description.trim();
            const kb = await create.run(() => api.post<KnowledgeBase>("/v1/kb", body));
            if (kb) {
              setCreated(kb.kb_id);
              setName("");
              setKbId("");
              setDescription("");
              await list.reload();
            }
          }}
        >
          <label for="kb-name">Name</label>
          <input id="kb-name" required value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <label for="kb-id">Id (optional)</label>
          <input
            id="kb-id"
            pattern="[a-z0-9][a-z0-9_\-]{0,62}"
            aria-describedby="kb-id-help"
            value={kbId}
            onInput={(e) => setKbId((e.target as HTMLInputElement).value)}
          />
          <span id="kb-id-help" class="muted small">
            Lower-case letters, digits, - and _; made from the name when empty. New knowledge bases start as working
            (unapproved).
          </span>
          <label for="kb-description">Description</label>
          <input id="kb-description" value={description} onInput={(e) => setDescription((e.target as HTMLInputElement).value)} />
          <div>
            <button type="submit" disabled={create.busy}>
              {create.busy ? "Creating…" : "Create"}
            </button>
          </div>
        </form>
        <ErrorBox error={create.error} label="Could not create the knowledge base" />
        {created ? (
          <Notice>
            Created <a href={`#/kb/${enc(created)}`}>{created}</a>.
          </Notice>
        ) : null}
      </Section>
    </>
  );
}
