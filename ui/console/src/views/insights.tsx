// Insights (/v1/insights/*): what readers and agents asked that the documents do not answer. The
// summary over time (a small inline SVG chart, its figures also as a table), and the gap groups
// ranked by count, each with its questions, one button to open an improvement task (deduplicated
// by the API) and a "fixed" mark that re-asks the group's questions and tracks later ones.
import { useState } from "preact/hooks";
import { enc, type Api } from "../api";
import {
  ActionButton,
  Badge,
  DataTable,
  ErrorBox,
  formatTime,
  Notice,
  RefreshButton,
  Section,
  SelectField,
  TextField,
  useAction,
  useLoad,
} from "../components";

interface Day {
  day: string;
  questions: number;
  answered: number;
  declined: number;
  lowConfidence: number;
  notHelpful: number;
}

interface Summary {
  questions: number;
  answered: number;
  declined: number;
  notHelpful: number;
  answerRate: number | null;
  declineRate: number | null;
  declinedByReason: Record<string, number>;
  declineRateByReason: Record<string, number>;
  confidence: Record<string, number>;
  callers: Record<string, number>;
  topCitedPages: { path: string; count: number }[];
  perDay: Day[];
}

interface Fix {
  fixedAt: string;
  fixedBy?: string;
  note?: string | null;
  recheck?: { asked: number; answered: number; results: { question: string; answered: boolean }[] } | null;
  afterFix: { answered: number; gaps: number };
  verdict: "answered" | "partly" | "unanswered" | "unknown";
}

interface Group {
  groupId: string;
  representative: string;
  count: number;
  distinctQuestions: number;
  firstSeen: string | null;
  lastSeen: string | null;
  callers: Record<string, number>;
  kinds: Record<string, number>;
  questions: { question: string; count: number }[];
  pages: { path: string; count: number }[];
  feedbackRecords: string[];
  improvementTask?: string | null;
  improvementTasks?: string[];
  mergedGroups?: string[];
  fix: Fix | null;
}

interface Gaps {
  groups: Group[];
  totalGroups: number;
  gapQuestions: number;
  ungrouped: number;
  refresh: { seen: number; ms: number; skipped: boolean };
}

const pct = (rate: number | null | undefined) => (rate === null || rate === undefined ? "–" : `${(rate * 100).toFixed(1)}%`);
const pairs = (record: Record<string, number>) =>
  Object.entries(record)
    .filter(([, n]) => n)
    .map(([k, n]) => `${k.replace(/_/g, " ")} ${n}`)
    .join(", ");

/** Stacked bars per day: answered, answered with low confidence, declined. */
function Chart({ days }: { days: Day[] }) {
  if (days.length === 0) return <p>No questions in this window.</p>;
  const width = 720;
  const height = 180;
  const pad = { left: 36, bottom: 24, top: 8 };
  const max = Math.max(1, ...days.map((d) => d.questions));
  const slot = (width - pad.left) / days.length;
  const bar = Math.max(2, Math.min(28, slot * 0.7));
  const y = (n: number) => ((height - pad.bottom - pad.top) * n) / max;
  const label = `Questions per day, ${days[0].day} to ${days[days.length - 1].day}: at most ${max} a day.`;
  const every = Math.ceil(days.length / 8);
  return (
    <figure>
      <svg class="chart" viewBox={`0 0 ${width} ${height}`} role="img" aria-label={label}>
        <title>{label}</title>
        <line class="axis" x1={pad.left} x2={width} y1={height - pad.bottom} y2={height - pad.bottom} />
        <text x={pad.left - 6} y={pad.top + 10} text-anchor="end">
          {max}
        </text>
        <text x={pad.left - 6} y={height - pad.bottom} text-anchor="end">
          0
        </text>
        {days.map((d, i) => {
          const x = pad.left + i * slot + (slot - bar) / 2;
          const good = d.answered - d.lowConfidence;
          const parts: [string, number][] = [
            ["answered", good],
            ["low", d.lowConfidence],
            ["declined", d.declined],
          ];
          let base = height - pad.bottom;
          return (
            <g key={d.day}>
              {parts.map(([cls, n]) => {
                const h = y(n);
                base -= h;
                return n ? <rect key={cls} class={cls} x={x} y={base} width={bar} height={h} /> : null;
              })}
              {i % every === 0 ? (
                <text x={x + bar / 2} y={height - 8} text-anchor="middle">
                  {d.day.slice(5)}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <ul class="legend">
          <li>
            <span class="swatch answered" aria-hidden="true" />
            answered
          </li>
          <li>
            <span class="swatch low" aria-hidden="true" />
            low confidence
          </li>
          <li>
            <span class="swatch declined" aria-hidden="true" />
            declined
          </li>
        </ul>
      </figcaption>
      <details>
        <summary>The figures per day</summary>
        <DataTable
          rows={days}
          columns={["Day", "Questions", "Answered", "Low confidence", "Declined", "Not helpful"]}
          row={(d) => (
            <tr key={d.day}>
              <th scope="row">{d.day}</th>
              <td>{d.questions}</td>
              <td>{d.answered}</td>
              <td>{d.lowConfidence}</td>
              <td>{d.declined}</td>
              <td>{d.notHelpful}</td>
            </tr>
          )}
        />
      </details>
    </figure>
  );
}

function download(text: string, name: string, type: string) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function Insights({ api }: { api: Api }) {
  const [kb, setKb] = useState("");
  const [since, setSince] = useState("");
  const [until, setUntil] = useState("");
  const [kind, setKind] = useState("");
  const [caller, setCaller] = useState("");
  const params = new URLSearchParams();
  if (kb.trim()) params.set("kb", kb.trim());
  if (since) params.set("since", since);
  if (until) params.set("until", until);
  if (caller) params.set("caller", caller);
  const gapParams = new URLSearchParams(params);
  if (kind) gapParams.set("kind", kind);
  const query = params.toString();
  const gapQuery = gapParams.toString();
  const summary = useLoad(() => api.get<Summary>(`/v1/insights/summary?${query}`), [api, query]);
  const gaps = useLoad(() => api.get<Gaps>(`/v1/insights/gaps?${gapQuery}`), [api, gapQuery]);
  const act = useAction();
  const [notes, setNotes] = useState<Record<string, string>>({});
  const [done, setDone] = useState<string | null>(null);
  const reload = async () => {
    await Promise.all([summary.reload(), gaps.reload()]);
  };
  const exportAs = (what: "gaps" | "summary", format: "csv" | "md") =>
    act.run(async () => {
      const q = new URLSearchParams(what === "gaps" ? gapParams : params);
      q.set("format", format);
      const text = await api.text(`/v1/insights/${what}?${q}`, format === "csv" ? "text/csv" : "text/markdown");
      download(text, `citegate-insights-${what}.${format}`, format === "csv" ? "text/csv" : "text/markdown");
    });
  const s = summary.data;
  const exports = (what: "gaps" | "summary", name: string) => (
    <>
      <button type="button" class="secondary" onClick={() => exportAs(what, "csv")}>
        {name} as CSV
      </button>
      <button type="button" class="secondary" onClick={() => exportAs(what, "md")}>
        {name} as Markdown
      </button>
    </>
  );

  return (
    <>
      <h1>Insights: what the documents do not answer</h1>
      <Section title="Filter" actions={<RefreshButton onClick={reload} />}>
        <div class="filters">
          <TextField id="in-kb" label="Knowledge base" on="change" value={kb} placeholder="all granted" onValue={setKb} />
          <TextField id="in-since" label="Since" on="change" type="date" value={since} onValue={setSince} />
          <TextField id="in-until" label="Until" on="change" type="date" value={until} onValue={setUntil} />
          <SelectField
            id="in-caller"
            label="Callers"
            value={caller}
            onValue={setCaller}
            options={[
              ["", "people and agents"],
              ["human", "people"],
              ["agent", "agents"],
            ]}
          />
          <SelectField
            id="in-kind"
            label="Gaps"
            value={kind}
            onValue={setKind}
            options={[
              ["", "every kind"],
              ["declined", "declined"],
              ["low_confidence", "low confidence"],
              ["not_helpful", "marked not helpful"],
            ]}
          />
        </div>
      </Section>

      <Section title="Questions over time" actions={exports("summary", "Summary")}>
        <ErrorBox error={summary.error} label="Could not load the summary" />
        {s ? (
          <>
            <ul class="figures">
              <li>
                <strong data-testid="questions">{s.questions}</strong> questions
              </li>
              <li>
                <strong>{pct(s.answerRate)}</strong> answered
              </li>
              <li>
                <strong>{pct(s.declineRate)}</strong> declined
              </li>
              <li>
                <strong>{s.notHelpful}</strong> marked not helpful
              </li>
            </ul>
            <Chart days={s.perDay} />
            <div class="columns">
              <div>
                <h3>Declines by reason</h3>
                <ul>
                  {Object.entries(s.declinedByReason).map(([reason, n]) => (
                    <li key={reason}>
                      <code>{reason}</code>: {n} ({pct(s.declineRateByReason[reason])})
                    </li>
                  ))}
                </ul>
              </div>
              <div>
                <h3>Confidence of answers</h3>
                <p>{pairs(s.confidence) || "none yet"}</p>
                <h3>Callers</h3>
                <p>{pairs(s.callers) || "none yet"}</p>
              </div>
              <div>
                <h3>Most cited pages</h3>
                <ol>
                  {s.topCitedPages.map((p) => (
                    <li key={p.path}>
                      <code>{p.path}</code> ({p.count})
                    </li>
                  ))}
                </ol>
              </div>
            </div>
          </>
        ) : null}
      </Section>

      <Section
        title={`Gaps${gaps.data ? ` (${gaps.data.totalGroups} groups, ${gaps.data.gapQuestions} questions)` : ""}`}
        actions={exports("gaps", "Gaps")}
      >
        <ErrorBox error={gaps.error} label="Could not load the gaps" />
        <ErrorBox error={act.error} label="The action failed" />
        <Notice>{done}</Notice>
        {gaps.data && gaps.data.groups.length === 0 ? <p>No gaps in this window.</p> : null}
        {gaps.data?.ungrouped ? (
          <p class="muted">{gaps.data.ungrouped} newer questions are still being grouped; refresh in a moment.</p>
        ) : null}
        <ol class="records">
          {(gaps.data?.groups ?? []).map((g) => (
            <li key={g.groupId} class="record" aria-labelledby={`g-${g.groupId}`}>
              <h3 id={`g-${g.groupId}`}>
                {g.representative} {g.fix ? <Badge value={g.fix.verdict} /> : null}
              </h3>
              <p class="muted small">
                <span class="gap-count" data-testid="count">
                  {g.count}
                </span>{" "}
                question{g.count === 1 ? "" : "s"} ({g.distinctQuestions} distinct) · {pairs(g.kinds)} · {pairs(g.callers)} · first{" "}
                {formatTime(g.firstSeen)} · last {formatTime(g.lastSeen)}
              </p>
              <details>
                <summary>Questions asked</summary>
                <ul>
                  {g.questions.map((q) => (
                    <li key={q.question}>
                      {q.question} <span class="muted">×{q.count}</span>
                    </li>
                  ))}
                </ul>
              </details>
              {g.pages.length ? (
                <p class="small">
                  Pages nearby:{" "}
                  {g.pages.map((p, i) => (
                    <span key={p.path}>
                      {i ? ", " : ""}
                      <code>{p.path}</code>
                    </span>
                  ))}
                </p>
              ) : null}
              {g.improvementTask || g.feedbackRecords.length ? (
                <p class="small">
                  Records:{" "}
                  {[
                    ...new Set([
                      ...(g.improvementTasks?.length ? g.improvementTasks : g.improvementTask ? [g.improvementTask] : []),
                      ...g.feedbackRecords,
                    ]),
                  ].join(", ")}
                </p>
              ) : null}
              {g.mergedGroups?.length ? (
                <p class="small muted">
                  Merged with {g.mergedGroups.length} group{g.mergedGroups.length === 1 ? "" : "s"} whose questions came
                  to mean the same: {g.mergedGroups.join(", ")}
                </p>
              ) : null}
              {g.fix ? (
                <p class="small">
                  Marked fixed {formatTime(g.fix.fixedAt)}
                  {g.fix.note ? ` (${g.fix.note})` : ""}:{" "}
                  {g.fix.recheck ? `re-asked ${g.fix.recheck.answered} of ${g.fix.recheck.asked} answered; ` : ""}
                  since then {g.fix.afterFix.answered} answered, {g.fix.afterFix.gaps} not.
                </p>
              ) : null}
              <div class="inline-form">
                <ActionButton
                  action={act}
                  aria-label={`Open improvement task for “${g.representative}”`}
                  run={() =>
                    api.post<{ created: boolean; record: { recordId: string; count: number } }>(
                      `/v1/insights/gaps/${enc(g.groupId)}/improvement_task`,
                      {},
                    )
                  }
                  onDone={async (result) => {
                    setDone(
                      result.created
                        ? `Opened improvement task ${result.record.recordId}.`
                        : `Counted on the open improvement task ${result.record.recordId} (${result.record.count} reports).`,
                    );
                    await gaps.reload();
                  }}
                >
                  Open improvement task
                </ActionButton>
                <TextField
                  id={`note-${g.groupId}`}
                  label="Fix note"
                  value={notes[g.groupId] ?? ""}
                  onValue={(value) => setNotes({ ...notes, [g.groupId]: value })}
                />
                <ActionButton
                  class="secondary"
                  action={act}
                  aria-label={`Mark fixed: “${g.representative}” (re-asks its questions)`}
                  run={() => {
                    const note = (notes[g.groupId] ?? "").trim();
                    return api.post<{ recheck?: { asked: number; answered: number } }>(
                      `/v1/insights/gaps/${enc(g.groupId)}/fix`,
                      note ? { note } : {},
                    );
                  }}
                  onDone={async (result) => {
                    const r = result.recheck;
                    setDone(`Marked fixed${r ? `: ${r.answered} of ${r.asked} questions answered now` : ""}.`);
                    await gaps.reload();
                  }}
                >
                  Mark fixed
                </ActionButton>
              </div>
            </li>
          ))}
        </ol>
      </Section>
    </>
  );
}
