// Remediation workflows: the list, and one workflow with its steps, the gate it waits at (approve
// or reject, with a reason), its step timeline and its notifications.
import { useEffect, useState } from 'preact/hooks';
import { api, type Remediation, type RemediationEvent, type RemediationQuery, type RemediationStep } from '../api/client';
import type { Caps } from '../main';
import { describedBy, ErrorNote, FailureNote, Field, fieldErrors, fmtTime, Status, StepsTable, usePaged, MoreButton } from '../ui';

const statuses = ['', 'queued', 'running', 'awaiting_user', 'completed', 'failed', 'cancelled'];
const ended = new Set(['completed', 'failed', 'cancelled', 'deleted']);

const subject = (r: Remediation) => {
  const c = (r.config ?? {}) as Record<string, unknown>;
  return [c['action'], c['resourceType'], r.subjectID].filter(Boolean).join(' ');
};

export function RemediationsPage() {
  const [q, setQ] = useState<RemediationQuery>({});
  const { items: list, next, err, load, more } = usePaged((cursor) => api.remediations({ ...q, cursor }), [q.status]);
  return (
    <>
      <h1>Remediation workflows</h1>
      <form class="filters" aria-label="Filter remediation workflows" onSubmit={(e) => e.preventDefault()}>
        <div class="field">
          <label for="r-status">Status</label>
          <select id="r-status" value={q.status ?? ''} onChange={(e) => setQ({ ...q, status: e.currentTarget.value || undefined })}>
            {statuses.map((s) => (
              <option value={s}>{s === 'awaiting_user' ? 'awaiting approval' : s || 'any'}</option>
            ))}
          </select>
        </div>
        <button type="button" onClick={load}>
          Refresh
        </button>
      </form>
      <ErrorNote error={err} />
      {list === null ? (
        <p aria-busy="true">Loading workflows…</p>
      ) : list.length === 0 ? (
        <p>No workflows match.</p>
      ) : (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Remediation workflows">
          <table>
            <caption class="sr-only">Remediation workflows, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Workflow</th>
                <th scope="col">Id</th>
                <th scope="col">Template</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.map((r) => (
                <tr key={r.id} data-remediation={r.id}>
                  <td>
                    <a href={`#/remediations/${r.id}`}>{r.name || r.id}</a>
                  </td>
                  <td>
                    <code>{r.id}</code>
                  </td>
                  <td>
                    <code>{r.template}</code>
                  </td>
                  <td>
                    <Status status={r.status} />
                  </td>
                  <td>{fmtTime(r.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <MoreButton next={next} more={more} />
    </>
  );
}

/** gate is the approval step the workflow waits at, if it waits at one. */
function gate(r: Remediation): RemediationStep | undefined {
  if (r.status !== 'awaiting_user' || r.cancelRequested) return undefined;
  return (r.workflow ?? []).find((s) => s.kind === 'approval' && s.status === 'waiting');
}

export function RemediationPage({ id, caps }: { id: string; caps: Caps }) {
  const [r, setR] = useState<Remediation | null>(null);
  const [events, setEvents] = useState<RemediationEvent[]>([]);
  const [err, setErr] = useState<unknown>(null);
  const [cancelling, setCancelling] = useState(false);
  const load = () =>
    Promise.all([api.remediation(id), api.remediationTimeline(id)]).then(([w, t]) => {
      setR(w);
      setEvents(t.data ?? []);
    }, setErr);
  useEffect(() => {
    void load();
  }, [id]);
  // The workflow runs in the engine: read it again until it ends. A workflow at its gate can be
  // decided elsewhere too, so it is read again there as well, less often.
  useEffect(() => {
    if (!r || ended.has(r.status ?? '')) return;
    const t = setTimeout(load, r.status === 'awaiting_user' ? 3000 : 500);
    return () => clearTimeout(t);
  }, [r]);
  if (!r) return err ? <ErrorNote error={err} /> : <p aria-busy="true">Loading workflow…</p>;
  const waiting = gate(r);
  const records = r.steps ?? [];
  return (
    <>
      <p>
        <a href="#/remediations">← All remediation workflows</a>
      </p>
      <div class="page-head">
        <h1>
          {r.name || r.id} <Status status={r.status} />
        </h1>
        <p class="meta">
          {subject(r)} · template <code>{r.template}</code> · <code>{r.id}</code>
          {r.cancelRequested && !ended.has(r.status ?? '') ? ' · cancelling' : ''}
        </p>
      </div>
      {caps.remediation.cancel && !ended.has(r.status ?? '') && !r.cancelRequested && (
        <div class="actions">
          {cancelling ? (
            <div class="confirm" role="group" aria-label="Confirm cancelling the workflow">
              <p>Cancel the workflow at its next step boundary? An action already taken is not reversed.</p>
              <button
                type="button"
                class="danger"
                onClick={async () => {
                  setCancelling(false);
                  setErr(null);
                  try {
                    setR(await api.cancelRemediation(id));
                  } catch (x) {
                    setErr(x);
                  }
                }}
              >
                Yes, cancel it
              </button>{' '}
              <button type="button" onClick={() => setCancelling(false)}>
                No
              </button>
            </div>
          ) : (
            <button type="button" onClick={() => setCancelling(true)}>
              Cancel workflow…
            </button>
          )}
        </div>
      )}
      <ErrorNote error={err} />
      {waiting &&
        (caps.remediation.approve ? (
          <Decide r={r} step={waiting} onDecided={(w) => (setR(w), void load())} />
        ) : (
          <p class="note" role="status">
            The workflow waits for an approval of step <strong>{waiting.name}</strong>; your token may not decide it (it lacks
            remediation:approve).
          </p>
        ))}
      <FailureNote failure={r.failure} />
      <section aria-labelledby="wf-h">
        <h2 id="wf-h">Steps</h2>
        <StepsTable kinds rows={(r.workflow ?? []).map((s, i) => ({ ...s, record: records[i] }))} />
      </section>
      <section aria-labelledby="tl-h">
        <h2 id="tl-h">Timeline</h2>
        {events.length === 0 ? (
          <p>No step events yet.</p>
        ) : (
          <ol class="timeline" aria-label="Step timeline, oldest first">
            {events.map((e) => (
              <li key={`${e.stepID}-${e.eventType}`} data-event={`${e.stepName}:${e.eventType}`}>
                <time dateTime={e.createdAt}>{fmtTime(e.createdAt)}</time> · <strong>{e.stepName}</strong> {e.eventType} by {e.actor}
                {e.reason ? <> — “{e.reason}”</> : null}
              </li>
            ))}
          </ol>
        )}
      </section>
      {(r.notifications ?? []).length > 0 && (
        <section aria-labelledby="nt-h">
          <h2 id="nt-h">Notifications</h2>
          <ul>
            {(r.notifications ?? []).map((n) => (
              <li key={`${n.stepID}-${n.channel}-${n.kind}`}>
                {n.kind} on {n.channel}: {n.status} after {n.attempts ?? 0} attempt(s){n.lastError ? ` (${n.lastError})` : ''}
              </li>
            ))}
          </ul>
        </section>
      )}
    </>
  );
}

// Deciding a gate: a reason (kept on the timeline), then Approve or Reject, each confirmed with
// what follows from it.
function Decide({ r, step, onDecided }: { r: Remediation; step: RemediationStep; onDecided: (r: Remediation) => void }) {
  const [reason, setReason] = useState('');
  const [verdict, setVerdict] = useState<'approve' | 'reject' | null>(null);
  const [fieldErr, setFieldErr] = useState<Record<string, string>>({});
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const after = (r.workflow ?? []).slice((r.workflow ?? []).findIndex((s) => s.id === step.id) + 1).map((s) => s.name);
  const decide = async () => {
    if (!verdict) return;
    setBusy(true);
    setErr(null);
    setFieldErr({});
    try {
      onDecided(await api.decide(r.id!, step.id!, verdict, reason ? { reason } : {}));
    } catch (x) {
      const { fields, rest } = fieldErrors(x);
      setFieldErr(fields);
      setErr(rest);
    } finally {
      setBusy(false);
      setVerdict(null);
    }
  };
  return (
    <section aria-labelledby="gate-h" class="gate">
      <h2 id="gate-h">Approval needed: {step.name}</h2>
      <p>
        The workflow waits here before it runs {after.join(', ') || 'its last steps'} on <strong>{subject(r)}</strong>.
      </p>
      <form aria-label="Decide the approval" onSubmit={(e) => e.preventDefault()}>
        <Field id="decision-reason" label="Reason" hint="kept on the workflow's timeline" error={fieldErr['reason']}>
          <textarea
            id="decision-reason"
            value={reason}
            onInput={(e) => setReason(e.currentTarget.value)}
            aria-invalid={fieldErr['reason'] ? true : undefined}
            aria-describedby={describedBy('decision-reason', 'h', fieldErr['reason'])}
          />
        </Field>
        {verdict ? (
          <div class="confirm" role="group" aria-label="Confirm the decision">
            <p>
              {verdict === 'approve'
                ? `Approve? The workflow then runs ${after.join(', ') || 'on'}.`
                : 'Reject? The workflow ends cancelled and nothing after the gate runs.'}
            </p>
            <button type="button" class={verdict === 'approve' ? 'primary' : 'danger'} disabled={busy} onClick={decide}>
              {verdict === 'approve' ? 'Yes, approve' : 'Yes, reject'}
            </button>{' '}
            <button type="button" onClick={() => setVerdict(null)}>
              No
            </button>
          </div>
        ) : (
          <div class="actions">
            <button type="button" class="primary" onClick={() => setVerdict('approve')}>
              Approve…
            </button>
            <button type="button" class="danger" onClick={() => setVerdict('reject')}>
              Reject…
            </button>
          </div>
        )}
      </form>
      {fieldErr['stepID'] && (
        <p class="field-error" role="alert">
          {fieldErr['stepID']}
        </p>
      )}
      <ErrorNote error={err} />
    </section>
  );
}
