// Knowledge bases: list, create, approve and unapprove (PATCH status), open one.
import { useState } from "preact/hooks";
import { enc, type Api, type KnowledgeBase } from "../api";
import {
  ActionButton,
  ActionForm,
  Badge,
  DataTable,
  ErrorBox,
  formatTime,
  Loading,
  Notice,
  RefreshButton,
  Section,
  SubmitButton,
  TextField,
  useAction,
  useFields,
  useLoad,
} from "../components";

/** Approval goes both ways: the status a knowledge base moves to, and the button's verb for it. */
export function approval(status: KnowledgeBase["status"]): { next: KnowledgeBase["status"]; verb: string } {
  return status === "approved" ? { next: "working", verb: "Unapprove" } : { next: "approved", verb: "Approve" };
}

export function KnowledgeBases({ api }: { api: Api }) {
  const list = useLoad(() => api.get<{ knowledge_bases: KnowledgeBase[] }>("/v1/kb"), [api]);
  const create = useAction();
  const toggle = useAction();
  const form = useFields({ name: "", kbId: "", description: "" });
  const [created, setCreated] = useState<string | null>(null);

  return (
    <>
      <h1>Knowledge bases</h1>
      <Section title="All knowledge bases" actions={<RefreshButton onClick={list.reload} />}>
        <ErrorBox error={list.error} label="Could not list knowledge bases" />
        <ErrorBox error={toggle.error} label="Could not change the status" />
        {list.loading && !list.data ? <Loading /> : null}
        <DataTable
          rows={list.data?.knowledge_bases}
          caption="Knowledge bases"
          empty="No knowledge base yet: create one below."
          columns={["Name", "Id", "Status", "Documents", "Updated", "Actions"]}
          row={(kb) => {
            const { next, verb } = approval(kb.status);
            return (
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
                  <ActionButton
                    class="secondary"
                    action={toggle}
                    aria-label={`${verb} ${kb.name}`}
                    run={() => api.patch(`/v1/kb/${enc(kb.kb_id)}`, { status: next })}
                    onDone={list.reload}
                  >
                    {verb}
                  </ActionButton>
                </td>
              </tr>
            );
          }}
        />
      </Section>
      <Section title="Create a knowledge base">
        <ActionForm
          class="grid-form"
          action={create}
          run={() => {
            const { name, kbId, description } = form.values;
            const body: Record<string, string> = { name: name.trim() };
            if (kbId.trim()) body.kb_id = kbId.trim();
            if (description.trim()) body.description = description.trim();
            return api.post<KnowledgeBase>("/v1/kb", body);
          }}
          onDone={async (kb) => {
            setCreated(kb.kb_id);
            form.reset();
            await list.reload();
          }}
        >
          <TextField id="kb-name" label="Name" required {...form.bind("name")} />
          <TextField
            id="kb-id"
            label="Id (optional)"
            pattern="[a-z0-9][a-z0-9_\-]{0,62}"
            aria-describedby="kb-id-help"
            {...form.bind("kbId")}
          />
          <span id="kb-id-help" class="muted small">
            Lower-case letters, digits, - and _; made from the name when empty. New knowledge bases start as working
            (unapproved).
          </span>
          <TextField id="kb-description" label="Description" {...form.bind("description")} />
          <div>
            <SubmitButton action={create} busyLabel="Creating…">
              Create
            </SubmitButton>
          </div>
        </ActionForm>
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
