// The chunks of one document: its parents (the sections shown as citation context) and, under
// each, the children that retrieval ranks, with their ref ids.
import { useState } from "preact/hooks";
import { enc, type Api, type DocumentRecord } from "../api";
import { Badge, Crumbs, ErrorBox, Loading, Section, TextField, useLoad } from "../components";

interface Parent {
  parent_id: string;
  index: number;
  heading: string;
  anchor: string;
  page: number | null;
  text: string;
}

interface Child {
  ref_id: string;
  parent_id: string;
  index: number;
  text: string;
  page: number | null;
  heading: string;
}

interface Chunks {
  kb_id: string;
  document_id: string;
  parents: Parent[];
  children: Child[];
}

export function ChunkViewer({ api, kbId, documentId }: { api: Api; kbId: string; documentId: string }) {
  const path = `/v1/kb/${enc(kbId)}/documents/${enc(documentId)}`;
  const doc = useLoad(() => api.get<DocumentRecord>(path), [api, path]);
  const chunks = useLoad(() => api.get<Chunks>(`${path}/chunks`), [api, path]);
  const [filter, setFilter] = useState("");

  const byParent = new Map<string, Child[]>();
  for (const child of chunks.data?.children ?? []) {
    const list = byParent.get(child.parent_id) ?? [];
    list.push(child);
    byParent.set(child.parent_id, list);
  }
  const needle = filter.trim().toLowerCase();
  const matches = (text: string) => !needle || text.toLowerCase().includes(needle);

  return (
    <>
      <Crumbs
        trail={[
          ["Knowledge bases", "#/kbs"],
          [kbId, `#/kb/${enc(kbId)}`],
        ]}
        here="chunks"
      />
      <h1>{doc.data?.source_name ?? documentId}</h1>
      <ErrorBox error={doc.error} label="Could not load the document" />
      {doc.data ? (
        <p>
          <Badge value={doc.data.status} /> <code>{documentId}</code> · {doc.data.counts?.parents ?? 0} parents,{" "}
          {doc.data.counts?.children ?? 0} chunks
        </p>
      ) : null}
      <Section title="Parents and chunks">
        <ErrorBox error={chunks.error} label="Could not load the chunks" />
        {chunks.data ? (
          <>
            <TextField id="chunk-filter" label="Find in chunks (text or ref id)" type="search" value={filter} onValue={setFilter} />
            <ol class="parents">
              {chunks.data.parents.map((parent) => {
                const children = (byParent.get(parent.parent_id) ?? []).filter((c) => matches(c.text) || matches(c.ref_id));
                if (needle && children.length === 0 && !matches(parent.text)) return null;
                return (
                  <li key={parent.parent_id} class="parent">
                    <details open={Boolean(needle) || chunks.data!.parents.length <= 3}>
                      <summary>
                        <strong>{parent.heading || "(no heading)"}</strong> <code class="small">{parent.parent_id}</code>
                        {parent.page ? <span class="muted small"> · page {parent.page}</span> : null}
                        <span class="muted small"> · {(byParent.get(parent.parent_id) ?? []).length} chunks</span>
                      </summary>
                      {/* Long parents scroll; a scrollable region must be reachable by keyboard. */}
                      <pre class="chunk-text parent-text" tabIndex={0} aria-label={`Text of ${parent.parent_id}`}>
                        {parent.text}
                      </pre>
                      <ul class="children" aria-label={`Chunks of ${parent.heading || parent.parent_id}`}>
                        {children.map((child) => (
                          <li key={child.ref_id} class="child">
                            <div>
                              <code class="ref">{child.ref_id}</code>
                              <span class="muted small">
                                {" "}
                                #{child.index}
                                {child.page ? ` · page ${child.page}` : ""}
                              </span>
                            </div>
                            <pre class="chunk-text">{child.text}</pre>
                          </li>
                        ))}
                      </ul>
                    </details>
                  </li>
                );
              })}
            </ol>
          </>
        ) : chunks.loading ? (
          <Loading />
        ) : null}
      </Section>
    </>
  );
}
