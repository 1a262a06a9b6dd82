// Agent credentials: list an agent's credentials, create one (its secret shown once, never
// again: only its hash is kept), revoke one (it stops working at once).
import { useState } from "preact/hooks";
import { enc, type Api } from "../api";
import {
  ActionButton,
  ActionForm,
  Badge,
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
  useLoad,
} from "../components";

interface Credential {
  credential_id: string;
  kind: "token" | "caller_key";
  status: string;
  description: string;
  created_at: string;
  revoked_at?: string | null;
  secret?: string;
}

const KINDS = [
  ["token", "bearer token (cgat_…)"],
  ["caller_key", "caller agent key (cgak_…)"],
] as const;

export function Credentials({ api }: { api: Api }) {
  const policies = useLoad(() => api.get<{ policies: { principal_key: string }[] }>("/admin/policies"), [api]);
  const agents = (policies.data?.policies ?? [])
    .map((p) => p.principal_key)
    .filter((k) => k.startsWith("agent:"))
    .map((k) => k.slice("agent:".length));
  const [agentInput, setAgentInput] = useState("");
  const [agent, setAgent] = useState("");
  const list = useLoad(
    () =>
      agent
        ? api.get<{ credentials: Credential[] }>(`/admin/agents/${enc(agent)}/credentials`)
        : Promise.resolve({ credentials: [] as Credential[] }),
    [api, agent],
  );
  const [kind, setKind] = useState<"token" | "caller_key">("token");
  const [description, setDescription] = useState("");
  const [secret, setSecret] = useState<Credential | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const act = useAction();

  return (
    <>
      <h1>Agent credentials</h1>
      <Section title="Agent">
        <ErrorBox error={policies.error} label="Could not list policies" />
        <form
          class="inline-form"
          onSubmit={(event) => {
            event.preventDefault();
            setSecret(null);
            setMessage(null);
            setAgent(agentInput.trim());
          }}
        >
          <TextField id="agent-id" label="Agent id" list="known-agents" required value={agentInput} onValue={setAgentInput} />
          <datalist id="known-agents">
            {agents.map((a) => (
              <option key={a} value={a} />
            ))}
          </datalist>
          <button type="submit">Show credentials</button>
        </form>
        {agents.length ? <p class="muted small">Agents with a policy: {agents.join(", ")}</p> : null}
      </Section>
      {agent ? (
        <>
          <Section title={`New credential for ${agent}`}>
            <ActionForm
              class="inline-form"
              action={act}
              run={() => {
                setMessage(null);
                return api.post<Credential>(`/admin/agents/${enc(agent)}/credentials`, {
                  kind,
                  ...(description.trim() ? { description: description.trim() } : {}),
                });
              }}
              onDone={async (created) => {
                setSecret(created);
                setDescription("");
                await list.reload();
              }}
            >
              <SelectField
                id="cred-kind"
                label="Kind"
                value={kind}
                options={KINDS}
                onValue={(value) => setKind(value as "token" | "caller_key")}
              />
              <TextField id="cred-description" label="Description" value={description} onValue={setDescription} />
              <SubmitButton action={act}>Create</SubmitButton>
            </ActionForm>
            {secret ? (
              <div class="secret" role="status">
                <p>
                  <strong>Copy this secret now: it is shown once and cannot be shown again.</strong>
                </p>
                <TextField
                  id="new-secret"
                  label={`Secret of ${secret.credential_id}`}
                  readOnly
                  value={secret.secret ?? ""}
                  onFocus={(e) => (e.target as HTMLInputElement).select()}
                />
                <button type="button" class="secondary" onClick={() => setSecret(null)}>
                  I have copied it
                </button>
              </div>
            ) : null}
          </Section>
          <Section title="Credentials" actions={<RefreshButton onClick={list.reload} />}>
            <ErrorBox error={list.error} label="Could not list credentials" />
            <ErrorBox error={act.error} label="The action failed" />
            <Notice>{message}</Notice>
            <DataTable
              rows={list.data?.credentials}
              caption={`Credentials of ${agent}`}
              empty="No credentials."
              columns={["Id", "Kind", "Status", "Description", "Created", "Actions"]}
              row={(c) => (
                <tr key={c.credential_id}>
                  <td>
                    <code>{c.credential_id}</code>
                  </td>
                  <td>{c.kind}</td>
                  <td>
                    <Badge value={c.status} />
                    {c.revoked_at ? <div class="muted small">{formatTime(c.revoked_at)}</div> : null}
                  </td>
                  <td>{c.description}</td>
                  <td>{formatTime(c.created_at)}</td>
                  <td>
                    {c.status === "active" ? (
                      <ActionButton
                        class="danger"
                        action={act}
                        aria-label={`Revoke ${c.credential_id}`}
                        confirm={`Revoke ${c.credential_id}? It stops working at once.`}
                        run={() => api.delete<Credential>(`/admin/agents/${enc(agent)}/credentials/${enc(c.credential_id)}`)}
                        onDone={async () => {
                          setMessage(`Revoked ${c.credential_id}.`);
                          await list.reload();
                        }}
                      >
                        Revoke
                      </ActionButton>
                    ) : null}
                  </td>
                </tr>
              )}
            />
          </Section>
        </>
      ) : null}
    </>
  );
}
