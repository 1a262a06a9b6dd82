// Policies: view every principal's policy, edit one as JSON (checked here for shape, then by the
// API, whose field errors are shown as it names them), or write a new one.
import { useEffect, useState } from "preact/hooks";
import { ApiError, enc, type Api } from "../api";
import {
  ActionForm,
  ErrorBox,
  Notice,
  RefreshButton,
  Section,
  SubmitButton,
  TextArea,
  TextField,
  useAction,
  useLoad,
} from "../components";

type Policy = Record<string, unknown> & { principal_key: string; description?: string; tools?: string[] };

const FIELDS = new Set([
  "description",
  "tools",
  "knowledge_bases",
  "files",
  "scope",
  "write_actions",
  "working_docs",
  "web",
  "model_fallback",
  "rate_limit_per_minute",
  "token_budget_per_day",
  "iam_arns",
  "tenant_id",
]);

const TEMPLATE = {
  description: "",
  tools: ["search", "ask", "get_page", "get_context"],
  knowledge_bases: ["*"],
  scope: { projects: null, path_prefixes: null, versions: null },
  write_actions: [],
  working_docs: false,
  rate_limit_per_minute: 120,
};

function editable(policy: Policy): string {
  const { principal_key: _key, ...rest } = policy;
  return JSON.stringify(rest, null, 2);
}

/** Problems the page can see before sending; the API checks the rest (types, ranges, names). */
function check(text: string): { body?: Record<string, unknown>; problems: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { problems: [`not valid JSON: ${(error as Error).message}`] };
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) return { problems: ["the policy must be a JSON object"] };
  const body = value as Record<string, unknown>;
  const problems = Object.keys(body)
    .filter((k) => !FIELDS.has(k))
    .map((k) => `unknown field “${k}”`);
  for (const name of ["tools", "knowledge_bases", "write_actions", "iam_arns"]) {
    if (name in body && !Array.isArray(body[name])) problems.push(`“${name}” must be a list`);
  }
  return { body, problems };
}

function fieldErrors(error: unknown): string[] {
  if (!(error instanceof ApiError) || !error.details || typeof error.details !== "object") return [];
  const fields = (error.details as { fields?: { field: string; problem: string }[] }).fields;
  return Array.isArray(fields) ? fields.map((f) => `${f.field}: ${f.problem}`) : [];
}

export function Policies({ api }: { api: Api }) {
  const list = useLoad(() => api.get<{ policies: Policy[] }>("/admin/policies"), [api]);
  const [selected, setSelected] = useState<string | null>(null);
  const [newKey, setNewKey] = useState("");
  const [text, setText] = useState("");
  const [saved, setSaved] = useState<string | null>(null);
  const save = useAction();
  const policies = list.data?.policies ?? [];
  const current = policies.find((p) => p.principal_key === selected);

  useEffect(() => {
    if (current) setText(editable(current));
  }, [selected, list.data]);

  const checked = text ? check(text) : { problems: [] as string[] };
  const serverFields = fieldErrors(save.error);

  return (
    <>
      <h1>Policies</h1>
      <div class="split">
        <Section title="Principals" actions={<RefreshButton onClick={list.reload} />}>
          <ErrorBox error={list.error} label="Could not list policies" />
          <ul class="picker">
            {policies.map((p) => (
              <li key={p.principal_key}>
                <button
                  type="button"
                  class={p.principal_key === selected ? "selected" : "link"}
                  aria-pressed={p.principal_key === selected}
                  onClick={() => {
                    setSaved(null);
                    save.clear();
                    setSelected(p.principal_key);
                  }}
                >
                  {p.principal_key}
                </button>
                {p.description ? <div class="muted small">{p.description}</div> : null}
              </li>
            ))}
          </ul>
          <form
            class="inline-form"
            onSubmit={(event) => {
              event.preventDefault();
              const key = newKey.trim();
              if (!key) return;
              setSaved(null);
              save.clear();
              setSelected(key);
              const existing = policies.find((p) => p.principal_key === key);
              setText(existing ? editable(existing) : JSON.stringify(TEMPLATE, null, 2));
            }}
          >
            <TextField
              id="new-principal"
              label="New policy for"
              placeholder="agent:my-bot"
              pattern="^(agent|human|service):.+|anonymous|human:\*$"
              value={newKey}
              onValue={setNewKey}
            />
            <button type="submit" class="secondary">
              Start
            </button>
          </form>
        </Section>
        <Section title={selected ? `Policy of ${selected}` : "Policy"}>
          {selected ? (
            <ActionForm
              action={save}
              ready={Boolean(checked.body) && checked.problems.length === 0}
              run={() => api.put<Policy>(`/admin/policies/${enc(selected)}`, checked.body)}
              onDone={async (stored) => {
                setSaved(stored.principal_key);
                await list.reload();
              }}
            >
              <TextArea
                id="policy-json"
                label="Policy (JSON, replaced whole)"
                class="code-editor"
                rows={22}
                spellcheck={false}
                aria-invalid={checked.problems.length > 0}
                aria-describedby="policy-problems"
                value={text}
                onValue={(value) => {
                  setSaved(null);
                  setText(value);
                }}
              />
              <div id="policy-problems" aria-live="polite">
                {checked.problems.length ? (
                  <ul class="problems">
                    {checked.problems.map((p) => (
                      <li key={p}>{p}</li>
                    ))}
                  </ul>
                ) : null}
              </div>
              <ErrorBox error={save.error} label="The API refused the policy" />
              {serverFields.length ? (
                <ul class="problems">
                  {serverFields.map((p) => (
                    <li key={p}>{p}</li>
                  ))}
                </ul>
              ) : null}
              {saved ? <Notice>Saved the policy of {saved}.</Notice> : null}
              <SubmitButton action={save} busyLabel="Saving…" disabled={checked.problems.length > 0}>
                Save policy
              </SubmitButton>
            </ActionForm>
          ) : (
            <p>Choose a principal, or start a new policy.</p>
          )}
        </Section>
      </div>
    </>
  );
}
