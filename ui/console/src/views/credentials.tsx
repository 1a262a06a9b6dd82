// Agent credentials: list an agent's credentials, create one (its secret shown once, never
// again: only its hash is kept), revoke one (it stops working at once).
import { useState } from "preact/hooks";
import { enc, type Api } from "../api";
import { Badge, ErrorBox, formatTime, Notice, Section, useAction, useLoad } from "../ui";

interface Credential {
  credential_id: string;
  kind: "token" | "caller_key";
  status: string;
  description: string;
  created_at: string;
  revoked_at?: string | null;
  secret?: string;
}

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
          <label for="agent-id">Agent id</label>
          <input id="agent-id" list="known-agents" required value={agentInput} onInput={(e) => setAgentInput((e.target as HTMLInputElement).value)} />
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
            <form
              class="inline-form"
              onSubmit={async (event) => {
                event.preventDefault();
                setMessage(null);
                const created = await act.run(() =>
                  api.post<Credential>(`/admin/agents/${enc(agent)}/credentials`, {
                    kind,
                    ...(description.trim() ? { description: description.trim() } : {}),
                  }),
                );
                if (created) {
                  setSecret(created);
                  setDescription("");
                  await list.reload();
                }
              }}
            >
              <label for="cred-kind">Kind</label>
              <select id="cred-kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value as "token" | "caller_key")}>
                <option value="token">bearer token (cgat_…)</option>
                <option value="caller_key">caller agent key (cgak_…)</option>
              </select>
              <label for="cred-description">Description</label>
              <input id="cred-description" value={description} onInput={(e) => setDescription((e.target as HTMLInputElement).value)} />
              <button type="submit" disabled={act.busy}>
                Create
              </button>
            </form>
            {secret ? (
              <div class="secret" role="status">
                <p>
                  <strong>Copy this secret now: it is shown once and cannot be shown again.</strong>
                </p>
                <label for="new-secret">Secret of {secret.credential_id}</label>
                <input id="new-secret" readOnly value={secret.secret ?? ""} onFocus={(e) => (e.target as HTMLInputElement).select()} />
                <button type="button" class="secondary" onClick={() => setSecret(null)}>
                  I have copied it
                </button>
              </div>
            ) : null}
          </Section>
          <Section title="Credentials" actions={<button type="button" class="secondary" onClick={list.reload}>Refresh</button>}>
            <ErrorBox error={list.error} label="Could not list credentials" />
            <ErrorBox error={act.error} label="The action failed" />
            {message ? <Notice>{message}</Notice> : null}
            {list.data && list.data.credentials.length === 0 ? <p>No credentials.</p> : null}
            {list.data && list.data.credentials.length > 0 ? (
              <table>
                <caption class="sr-only">Credentials of {agent}</caption>
                <thead>
                  <tr>
                    <th scope="col">Id</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Status</th>
                    <th scope="col">Description</th>
                    <th scope="col">Created</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.credentials.map((c) => (
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
                          <button
                            type="button"
                            class="danger"
                            disabled={act.busy}
                            aria-label={`Revoke ${c.credential_id}`}
                            onClick={async () => {
                              if (!confirm(`Revoke ${c.credential_id}? It stops working at once.`)) return;
                              const revoked = await act.run(() =>
                                api.delete<Credential>(`/admin/agents/${enc(agent)}/credentials/${enc(c.credential_id)}`),
                              );
                              if (revoked) {
                                setMessage(`Revoked ${c.credential_id}.`);
                                await list.reload();
                              }
                            }}
                          >
                            Revoke
                          </button>
                        ) : null}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : null}
          </Section>
        </>
      ) : null}
    </>
  );
}
