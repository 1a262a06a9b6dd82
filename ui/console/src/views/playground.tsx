// Retrieval and answer playground: what a knowledge base returns for a query (scores, fusion
// stats), and what it answers, with the citations as resolve_refs returns them.
import { useState } from "preact/hooks";
import { enc, type Api, type KnowledgeBase } from "../api";
import {
  ActionButton,
  ActionForm,
  Badge,
  ErrorBox,
  Section,
  SelectField,
  SubmitButton,
  TextArea,
  TextField,
  useAction,
  useLoad,
} from "../components";

interface Hit {
  ref_id: string;
  chunk_text: string;
  // Absolute relevance estimate in [0, 1]: comparable across queries, what score_threshold keeps.
  score: number;
  // What the rank follows: the fusion's score, relative to this query (null when the engine gave none).
  rank_score: number | null;
}

interface RetrieveResult {
  results: Hit[];
  stats: Record<string, unknown> & {
    engine?: string;
    mode?: string;
    fusion?: Record<string, unknown>;
    fallbacks?: string[];
    timings_ms?: Record<string, number>;
  };
}

interface Citation {
  ref_id: string;
  source_name: string;
  document_id: string;
  parent_id: string;
  page_hint: number | null;
  snippet: string;
  title: string;
  heading: string;
  path: string;
  url: string;
  anchor: string;
  version: string;
}

interface AskResult {
  answer: string;
  used_refs: string[];
  no_answer: boolean;
  no_answer_reason: string | null;
  stats: Record<string, unknown>;
}

function StatsTable({ stats }: { stats: Record<string, unknown> }) {
  const rows = Object.entries(stats).filter(([, v]) => v !== null && v !== undefined);
  return (
    <table class="stats">
      <caption class="sr-only">Statistics</caption>
      <tbody>
        {rows.map(([name, value]) => (
          <tr key={name}>
            <th scope="row">{name}</th>
            <td>
              {typeof value === "object" ? (
                Array.isArray(value) && value.length === 0 ? (
                  <span class="muted">none</span>
                ) : (
                  <code class="wrap">{formatObject(value)}</code>
                )
              ) : (
                String(value)
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function formatObject(value: unknown): string {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    return Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}: ${typeof v === "number" ? Math.round(v * 1000) / 1000 : typeof v === "object" ? JSON.stringify(v) : String(v)}`)
      .join(", ");
  }
  return JSON.stringify(value);
}

export function Playground({ api, initialKb }: { api: Api; initialKb: string }) {
  const kbs = useLoad(() => api.get<{ knowledge_bases: KnowledgeBase[] }>("/v1/kb"), [api]);
  const [kbId, setKbId] = useState(initialKb);
  const [query, setQuery] = useState("");
  const [topK, setTopK] = useState(8);
  const [threshold, setThreshold] = useState("");
  const [retrieved, setRetrieved] = useState<RetrieveResult | null>(null);
  const [answer, setAnswer] = useState<AskResult | null>(null);
  const [citations, setCitations] = useState<{ citations: Citation[]; missing: string[] } | null>(null);
  const retrieve = useAction();
  const ask = useAction();

  const chosen = kbId || kbs.data?.knowledge_bases[0]?.kb_id || "";
  const body = () => {
    const extra: Record<string, unknown> = { top_k: topK };
    if (threshold.trim()) extra.score_threshold = Number(threshold);
    return extra;
  };

  return (
    <>
      <h1>Playground</h1>
      <Section title="Query">
        <ErrorBox error={kbs.error} label="Could not list knowledge bases" />
        <ActionForm
          class="grid-form"
          action={retrieve}
          run={() => {
            setRetrieved(null);
            return api.post<RetrieveResult>(`/v1/kb/${enc(chosen)}/retrieve`, { query, ...body() });
          }}
          onDone={setRetrieved}
        >
          <SelectField
            id="pg-kb"
            label="Knowledge base"
            value={chosen}
            onValue={setKbId}
            options={(kbs.data?.knowledge_bases ?? []).map((kb) => [kb.kb_id, `${kb.name} (${kb.kb_id}, ${kb.status})`] as const)}
          />
          <TextArea id="pg-query" label="Query or question" required rows={2} value={query} onValue={setQuery} />
          <TextField id="pg-topk" label="Top k" type="number" min={1} max={50} value={topK} onValue={(value) => setTopK(Number(value))} />
          <TextField
            id="pg-threshold"
            label="Score threshold (optional)"
            type="number"
            step="0.01"
            min={0}
            value={threshold}
            onValue={setThreshold}
          />
          <div class="toolbar">
            <SubmitButton action={retrieve} busyLabel="Retrieving…" disabled={!chosen}>
              Retrieve
            </SubmitButton>
            <ActionButton
              class="secondary"
              action={ask}
              busyLabel="Asking…"
              disabled={!chosen || !query.trim()}
              run={async () => {
                setAnswer(null);
                setCitations(null);
                const asked = await api.post<AskResult>(`/v1/kb/${enc(chosen)}/ask`, { question: query, ...body() });
                // The citations as any client would resolve the answer's refs.
                const resolved = asked.used_refs.length
                  ? await api.post<{ citations: Citation[]; missing: string[] }>(`/v1/kb/${enc(chosen)}/resolve_refs`, {
                      ref_ids: asked.used_refs,
                    })
                  : { citations: [], missing: [] };
                return { asked, resolved };
              }}
              onDone={(result) => {
                setAnswer(result.asked);
                setCitations(result.resolved);
              }}
            >
              Ask
            </ActionButton>
          </div>
        </ActionForm>
        <ErrorBox error={retrieve.error} label="Retrieval failed" />
        <ErrorBox error={ask.error} label="Asking failed" />
      </Section>

      {answer ? (
        <Section title="Answer">
          {answer.no_answer ? (
            <p>
              <Badge value="no_answer" /> {answer.no_answer_reason}
            </p>
          ) : null}
          <div class="answer" data-testid="answer">
            {answer.answer}
          </div>
          <h3>Citations (resolve_refs)</h3>
          {citations && citations.citations.length > 0 ? (
            <ol class="citations">
              {citations.citations.map((c) => (
                <li key={c.ref_id}>
                  <strong>{c.title || c.source_name}</strong>
                  {c.heading ? ` — ${c.heading}` : ""} <code class="ref">{c.ref_id}</code>
                  <div class="muted small">
                    {c.source_name}
                    {c.page_hint ? ` · page ${c.page_hint}` : ""}
                    {c.path ? ` · ${c.path}` : ""}
                    {c.version ? ` · ${c.version}` : ""} · parent <code>{c.parent_id}</code>
                    {c.url ? (
                      <>
                        {" "}
                        · <a href={c.anchor ? `${c.url}#${c.anchor}` : c.url}>open</a>
                      </>
                    ) : null}
                  </div>
                  <blockquote>{c.snippet}</blockquote>
                </li>
              ))}
            </ol>
          ) : (
            <p class="muted">No citations.</p>
          )}
          {citations && citations.missing.length > 0 ? (
            <p class="muted">Not resolvable (outside your scope or gone): {citations.missing.join(", ")}</p>
          ) : null}
          <details>
            <summary>Answer statistics</summary>
            <StatsTable stats={answer.stats} />
          </details>
        </Section>
      ) : null}

      {retrieved ? (
        <Section title={`Hits (${retrieved.results.length})`}>
          <StatsTable stats={retrieved.stats} />
          {retrieved.results.length === 0 ? <p>Nothing matched.</p> : null}
          {retrieved.results.length > 0 ? (
            <p class="muted small" data-testid="hit-order">
              Ranked by the rank score (the fusion of BM25 and vector scores, relative to this query), which
              orders hits best; relevance is the absolute estimate that the score threshold keeps, so a
              lower hit can show a higher relevance.
            </p>
          ) : null}
          <ol class="hits">
            {retrieved.results.map((hit) => (
              <li key={hit.ref_id} class="hit">
                <div>
                  <span class="muted small">rank score</span>{" "}
                  <span class="score rank-score" title="What the order follows: the fusion's score, relative to this query">
                    {hit.rank_score === null ? "–" : hit.rank_score.toFixed(3)}
                  </span>{" "}
                  <span class="muted small">relevance</span>{" "}
                  <span class="score relevance" title="Absolute estimate in [0, 1], comparable across queries: what the score threshold keeps">
                    {hit.score.toFixed(3)}
                  </span>{" "}
                  <code class="ref">{hit.ref_id}</code>
                </div>
                <pre class="chunk-text">{hit.chunk_text}</pre>
              </li>
            ))}
          </ol>
        </Section>
      ) : null}
    </>
  );
}
