// The provisioning wizard: resource type → space → network → configuration → review.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, ApiError, type CatalogType, type CreateJob, type Discovered, type Job, type Plan, type Space } from '../api/client';
import type { Caps } from '../main';
import { describedBy, ErrorNote, Field, fieldErrors, go } from '../ui';

type Prop = {
  type?: string | string[];
  enum?: unknown[];
  default?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  pattern?: string;
};
type Schema = { properties?: Record<string, Prop>; required?: string[] };

const steps = ['Resource type', 'Space', 'Network', 'Configuration', 'Review'] as const;
const datastoreEngines = new Set(['postgres', 'mysql', 'redis']);
const familyOf: Record<string, string> = {
  kubernetes: 'kubernetes',
  'vm-pool': 'vm_pool',
  network: 'network',
  registry: 'registry',
  'dns-zone': 'dns_zone',
  'helm-component': 'component',
};

/** kindFor is the job kind the server provisions a catalog type as. */
export function kindFor(t: CatalogType): string {
  if (datastoreEngines.has(t.type ?? '')) return 'datastore';
  return familyOf[t.type ?? ''] ?? `${t.kind}/${t.type}`;
}

const typeKey = (t: CatalogType) => `${t.kind}/${t.type}`;
const propType = (p: Prop) => (Array.isArray(p.type) ? p.type.find((x) => x !== 'null') : p.type) ?? 'string';

function defaults(s: Schema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(s.properties ?? {})) if (p.default !== undefined) out[k] = p.default;
  return out;
}

export function Wizard({ caps, draftID }: { caps: Caps; draftID?: string }) {
  const [step, setStep] = useState(0);
  const [types, setTypes] = useState<CatalogType[]>([]);
  const [typeK, setTypeK] = useState('');
  const [spaces, setSpaces] = useState<Space[]>([]);
  const [spaceID, setSpaceID] = useState('');
  const [network, setNetwork] = useState('new');
  const [config, setConfig] = useState<Record<string, unknown>>({});
  const [fieldErr, setFieldErr] = useState<Record<string, string>>({});
  const [err, setErr] = useState<unknown>(null);
  const [draft, setDraft] = useState<Job | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    Promise.all([api.types(), api.spaces()]).then(([t, s]) => {
      setTypes(t.data ?? []);
      setSpaces(s.data ?? []);
    }, setErr);
  }, []);
  // Resuming a draft: its saved request fills every step, and the wizard opens at Review.
  useEffect(() => {
    if (!draftID || types.length === 0) return;
    api.job(draftID).then((j) => {
      const cfg = (j.config ?? {}) as Record<string, unknown>;
      const t = types.find((t) => kindFor(t) === j.kind && (j.kind !== 'datastore' || t.type === cfg['engine']));
      if (t) setTypeK(typeKey(t));
      setSpaceID(j.spaceID ?? '');
      setNetwork(typeof cfg['vpcID'] === 'string' ? (cfg['vpcID'] as string) : 'new');
      setConfig(cfg);
      setDraft(j);
      setStep(4);
    }, setErr);
  }, [draftID, types]);
  const type = types.find((t) => typeKey(t) === typeK);
  const schema = (type?.settings ?? {}) as Schema;
  const space = spaces.find((s) => s.id === spaceID);
  const request = (): CreateJob => ({
    kind: type ? kindFor(type) : '',
    spaceID,
    name: typeof config['name'] === 'string' ? (config['name'] as string) : undefined,
    config,
  });
  if (!caps.create)
    return (
      <>
        <h1>New resource</h1>
        <p role="alert">Your token may not create provisioning jobs (it lacks provisioning:create).</p>
      </>
    );
  // A type that takes an existing network names it in vpcID; "create new" leaves it out.
  const takesNetwork = !!schema.properties?.['vpcID'];
  const next = () => {
    setErr(null);
    if (step === 2 && takesNetwork) {
      const c = { ...config };
      if (network === 'new') delete c['vpcID'];
      else c['vpcID'] = network;
      setConfig(c);
    }
    setStep(step + 1);
  };
  const fromServer = (x: unknown) => {
    if (x instanceof ApiError && x.problem.errors?.length) {
      const f: Record<string, string> = {};
      for (const [k, v] of Object.entries(x.fields())) f[k.replace(/^config\./, '')] = v;
      setFieldErr(f);
      // The errors are about the configuration: show them where it is edited.
      if (Object.keys(x.fields()).some((k) => k.startsWith('config.'))) setStep(3);
    }
    setErr(x);
  };
  const provision = async () => {
    setBusy(true);
    setFieldErr({});
    setErr(null);
    try {
      const j = draft ? await api.patchJob(draft.id!, { status: 'queued' }) : await api.createJob(request());
      go(`jobs/${j.id}`);
    } catch (x) {
      fromServer(x);
    } finally {
      setBusy(false);
    }
  };
  const saveDraft = async () => {
    setBusy(true);
    setFieldErr({});
    setErr(null);
    try {
      const j = await api.createJob({ ...request(), draft: true });
      setDraft(j);
      go(`jobs/${j.id}`);
    } catch (x) {
      fromServer(x);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <h1>New resource</h1>
      <nav aria-label="Wizard steps">
        <ol class="wizard-steps">
          {steps.map((s, i) => (
            <li key={s} aria-current={i === step ? 'step' : undefined} class={i < step ? 'done' : ''}>
              <span class="num">{i + 1}</span> {s}
            </li>
          ))}
        </ol>
      </nav>
      {draft && (
        <p class="note">
          Resuming draft <code>{draft.id}</code>; Provision queues it as saved. To change it, delete the draft and start a new one.
        </p>
      )}
      <ErrorNote error={err} />
      <section aria-labelledby="step-h" class="wizard-body">
        <h2 id="step-h">
          Step {step + 1}: {steps[step]}
        </h2>
        {step === 0 && (
          <TypeStep
            types={types}
            value={typeK}
            onChange={(k) => {
              setTypeK(k);
              const t = types.find((t) => typeKey(t) === k);
              setConfig(defaults((t?.settings ?? {}) as Schema));
              setFieldErr({});
            }}
          />
        )}
        {step === 1 && (
          <SpaceStep spaces={spaces} value={spaceID} onChange={setSpaceID} canCreate={caps.createSpace} onCreated={(s) => (setSpaces([...spaces, s]), setSpaceID(s.id!))} />
        )}
        {step === 2 && <NetworkStep spaceID={spaceID} value={network} onChange={setNetwork} takesNetwork={takesNetwork} />}
        {step === 3 && <ConfigStep schema={schema} value={config} onChange={setConfig} errors={fieldErr} />}
        {step === 4 && (
          <ReviewStep request={request()} typeTitle={type?.title ?? typeK} spaceName={space ? `${space.name} (${space.provider}, ${space.region})` : spaceID} network={network} />
        )}
      </section>
      <div class="wizard-nav">
        {step > 0 && !draft && (
          <button type="button" onClick={() => setStep(step - 1)}>
            Back
          </button>
        )}
        {step < 4 && (
          <button type="button" class="primary" onClick={next} disabled={(step === 0 && !type) || (step === 1 && !spaceID)}>
            Next
          </button>
        )}
        {step === 4 && (
          <>
            {!draft && (
              <button type="button" onClick={saveDraft} disabled={busy}>
                Save as draft
              </button>
            )}
            <button type="button" class="primary" onClick={provision} disabled={busy}>
              Provision
            </button>
          </>
        )}
      </div>
    </>
  );
}

function TypeStep({ types, value, onChange }: { types: CatalogType[]; value: string; onChange: (k: string) => void }) {
  return (
    <fieldset>
      <legend>What do you want to provision?</legend>
      <div class="cards">
        {types.map((t) => {
          const k = typeKey(t);
          const id = `type-${k.replace(/\W/g, '-')}`;
          return (
            <div class={value === k ? 'card selected' : 'card'} key={k}>
              <input type="radio" name="type" id={id} value={k} checked={value === k} onChange={() => onChange(k)} aria-describedby={`${id}-d`} />
              <label for={id}>{t.title}</label>
              <p id={`${id}-d`} class="hint">
                {t.description} <code>{k}</code>
              </p>
            </div>
          );
        })}
      </div>
    </fieldset>
  );
}

function SpaceStep(props: { spaces: Space[]; value: string; onChange: (id: string) => void; canCreate: boolean; onCreated: (s: Space) => void }) {
  const [name, setName] = useState('');
  const [err, setErr] = useState<unknown>(null);
  const [fieldErr, setFieldErr] = useState<Record<string, string>>({});
  return (
    <>
      <fieldset>
        <legend>Space (the cloud account and region the resource goes into)</legend>
        {props.spaces.length === 0 && <p>No spaces yet.</p>}
        {props.spaces.map((s) => (
          <div class="radio" key={s.id}>
            <input type="radio" name="space" id={`space-${s.id}`} checked={props.value === s.id} onChange={() => props.onChange(s.id!)} />
            <label for={`space-${s.id}`}>
              {s.name} — {s.provider}, {s.region}
              {s.cloudAccountID ? `, account ${s.cloudAccountID}` : ''}
            </label>
          </div>
        ))}
      </fieldset>
      {props.canCreate && (
        <form
          class="inline-form"
          aria-label="Create a local space"
          onSubmit={async (e) => {
            e.preventDefault();
            setErr(null);
            setFieldErr({});
            try {
              const s = await api.createSpace({ name, provider: 'local', region: 'local' });
              setName('');
              props.onCreated(s);
            } catch (x) {
              const { fields, rest } = fieldErrors(x);
              setFieldErr(fields);
              setErr(rest);
            }
          }}
        >
          <h3>Create a local space</h3>
          <Field id="new-space" label="Space name" error={fieldErr['name']} hint="runs resources on this server's machine (no cloud account)">
            <input id="new-space" value={name} required onInput={(e) => setName(e.currentTarget.value)} aria-describedby={describedBy('new-space', 'h', fieldErr['name'])} />
          </Field>
          <button type="submit">Create space</button>
          <ErrorNote error={err} />
        </form>
      )}
    </>
  );
}

function NetworkStep({ spaceID, value, onChange, takesNetwork }: { spaceID: string; value: string; onChange: (v: string) => void; takesNetwork: boolean }) {
  const [items, setItems] = useState<Discovered[] | null>(null);
  const [why, setWhy] = useState('');
  useEffect(() => {
    api.discovery(spaceID, 'networks').then(
      (p) => setItems(p.items ?? []),
      (e) => {
        setItems([]);
        setWhy(e instanceof ApiError && e.status === 404 ? 'This server does not offer network discovery.' : `Discovery failed: ${String((e as Error).message)}`);
      },
    );
  }, [spaceID]);
  // "Create new" is offered at once: a slow cloud answer must not hold up the wizard.
  return (
    <fieldset>
      <legend>Network</legend>
      {items === null && <p aria-busy="true">Discovering the space's networks…</p>}
      {why && <p class="note">{why} The job creates what it needs.</p>}
      {!takesNetwork && <p class="hint">This type has no network setting: it is placed in the space's network, or one the job makes.</p>}
      <div class="radio">
        <input type="radio" name="network" id="net-new" checked={value === 'new'} onChange={() => onChange('new')} />
        <label for="net-new">Create new (the job makes or picks the network itself)</label>
      </div>
      {(items ?? []).map((n) => (
        <div class="radio" key={n.id}>
          <input type="radio" name="network" id={`net-${n.id}`} checked={value === n.id} onChange={() => onChange(n.id!)} />
          <label for={`net-${n.id}`}>
            {n.name || n.id} {n.cidr && <code>{n.cidr}</code>} {n.managed ? '(managed by Groundwork)' : ''}
          </label>
        </div>
      ))}
    </fieldset>
  );
}

function ConfigStep(props: { schema: Schema; value: Record<string, unknown>; onChange: (v: Record<string, unknown>) => void; errors: Record<string, string> }) {
  const set = (k: string, v: unknown) => {
    const next = { ...props.value };
    if (v === undefined || v === '') delete next[k];
    else next[k] = v;
    props.onChange(next);
  };
  const entries = Object.entries(props.schema.properties ?? {});
  if (entries.length === 0) return <p>This type has no settings.</p>;
  return (
    <form class="config" aria-label="Configuration" onSubmit={(e) => e.preventDefault()}>
      {props.errors[''] && <p role="alert">{props.errors['']}</p>}
      {entries.map(([k, p]) => {
        const id = `cfg-${k}`;
        const err = props.errors[k];
        const t = propType(p);
        const label = k + (props.schema.required?.includes(k) ? ' (required)' : '');
        const v = props.value[k];
        const aria = { 'aria-describedby': describedBy(id, p.description, err), 'aria-invalid': err ? true : undefined };
        if (p.enum)
          return (
            <Field id={id} label={label} hint={p.description} error={err} key={k}>
              <select id={id} value={String(v ?? '')} onChange={(e) => set(k, e.currentTarget.value)} {...aria}>
                {v === undefined && <option value="">(provider default)</option>}
                {p.enum.map((o) => (
                  <option value={String(o)}>{String(o)}</option>
                ))}
              </select>
            </Field>
          );
        if (t === 'boolean')
          return (
            <div class={err ? 'field check invalid' : 'field check'} key={k}>
              <input type="checkbox" id={id} checked={v === true} onChange={(e) => set(k, e.currentTarget.checked)} {...aria} />
              <label for={id}>{k}</label>
              {p.description && (
                <p class="hint" id={`${id}-hint`}>
                  {p.description}
                </p>
              )}
              {err && (
                <p class="field-error" id={`${id}-error`} role="alert">
                  {err}
                </p>
              )}
            </div>
          );
        if (t === 'integer' || t === 'number')
          return (
            <Field id={id} label={label} hint={hintOf(p)} error={err} key={k}>
              <input
                id={id}
                type="number"
                inputMode="numeric"
                value={v === undefined ? '' : String(v)}
                onInput={(e) => set(k, e.currentTarget.value === '' ? undefined : Number(e.currentTarget.value))}
                {...aria}
                aria-describedby={describedBy(id, hintOf(p), err)}
              />
            </Field>
          );
        if (t === 'string')
          return (
            <Field id={id} label={label} hint={p.description} error={err} key={k}>
              <input id={id} value={typeof v === 'string' ? v : ''} onInput={(e) => set(k, e.currentTarget.value)} {...aria} />
            </Field>
          );
        // Objects and arrays: edited as JSON.
        return (
          <Field id={id} label={`${label} (JSON)`} hint={p.description} error={err} key={k}>
            <textarea
              id={id}
              value={v === undefined ? '' : JSON.stringify(v)}
              onChange={(e) => {
                try {
                  set(k, e.currentTarget.value ? JSON.parse(e.currentTarget.value) : undefined);
                } catch {
                  /* left as typed; the server reports it */
                }
              }}
              {...aria}
            />
          </Field>
        );
      })}
    </form>
  );
}

function hintOf(p: Prop): string | undefined {
  const range = p.minimum !== undefined || p.maximum !== undefined ? `${p.minimum ?? '…'} to ${p.maximum ?? '…'}` : '';
  return [p.description, range].filter(Boolean).join('; ') || undefined;
}

function ReviewStep(props: { request: CreateJob; typeTitle: string; spaceName: string; network: string }) {
  const [plan, setPlan] = useState<Plan | null>(null);
  const [planState, setPlanState] = useState<'loading' | 'ok' | 'unavailable' | 'error'>('loading');
  const [planErr, setPlanErr] = useState<unknown>(null);
  const [copied, setCopied] = useState('');
  const body = useMemo(() => JSON.stringify(props.request), [props.request]);
  useEffect(() => {
    setPlanState('loading');
    api.plan(props.request).then(
      (p) => (setPlan(p), setPlanState('ok')),
      (e) => {
        if (e instanceof ApiError && (e.status === 404 || e.status === 405)) setPlanState('unavailable');
        else (setPlanErr(e), setPlanState('error'));
      },
    );
  }, [body]);
  const policy = plan?.policy?.format && plan.policy.format !== 'none' ? JSON.stringify(plan.policy.document, null, 2) : '';
  const operations = [...new Set((plan?.steps ?? []).flatMap((s) => s.operations ?? []))];
  const cost = plan?.cost;
  return (
    <>
      <dl class="summary">
        <dt>Type</dt>
        <dd>{props.typeTitle}</dd>
        <dt>Space</dt>
        <dd>{props.spaceName}</dd>
        <dt>Network</dt>
        <dd>{props.network === 'new' ? 'create new' : props.network}</dd>
        <dt>Job kind</dt>
        <dd>
          <code>{props.request.kind}</code>
        </dd>
        <dt>Name</dt>
        <dd>{props.request.name ?? '—'}</dd>
      </dl>
      <h3>Configuration</h3>
      <pre tabIndex={0} aria-label="Configuration to submit">{JSON.stringify(props.request.config, null, 2)}</pre>
      <h3>Plan</h3>
      {planState === 'loading' && <p aria-busy="true">Planning…</p>}
      {planState === 'unavailable' && (
        <p class="note" data-plan="unavailable">
          Plan unavailable: this server does not offer plans yet, so the steps, IAM operations, policy and cost cannot be shown before
          provisioning. The job's steps appear on its page once it starts.
        </p>
      )}
      {planState === 'error' && <ErrorNote error={planErr} />}
      {plan && (
        <>
          <ol class="plan-steps">
            {(plan.steps ?? []).map((s) => (
              <li key={s.name}>
                <strong>{s.name}</strong>
                <ul>
                  {(s.resources ?? []).map((r) => (
                    <li>
                      {r.action} {r.type} <code>{r.name}</code>
                      {r.count && r.count > 1 ? ` ×${r.count}` : ''}
                    </li>
                  ))}
                  {(s.operations ?? []).length > 0 && <li>IAM: {(s.operations ?? []).join(', ')}</li>}
                </ul>
              </li>
            ))}
          </ol>
          <h3 id="iam-h">IAM operations</h3>
          {!plan.operationsKnown ? (
            <p class="note" data-iam="unknown">
              The provider cannot say which cloud operations this type calls; the steps above list none, which is not the same as
              none.
            </p>
          ) : operations.length === 0 ? (
            <p data-iam="none">None: this plan calls no cloud API ({plan.provider}).</p>
          ) : (
            <ul class="iam-ops" aria-labelledby="iam-h">
              {operations.map((o) => (
                <li key={o}>
                  <code>{o}</code>
                </li>
              ))}
            </ul>
          )}
          {policy ? (
            <>
              <h3>Least-privilege policy ({plan.policy?.format})</h3>
              <pre tabIndex={0} aria-label="Policy document" class="policy">
                {policy}
              </pre>
              <button
                type="button"
                onClick={() =>
                  navigator.clipboard.writeText(policy).then(
                    () => setCopied('Copied.'),
                    () => setCopied('Copy failed; select the text instead.'),
                  )
                }
              >
                Copy policy
              </button>{' '}
              <span aria-live="polite">{copied}</span>
            </>
          ) : (
            <p data-policy="none">No policy to grant: nothing is called in a cloud.</p>
          )}
          <h3>Monthly cost</h3>
          <div class="table-wrap" tabIndex={0} role="region" aria-label="Monthly cost">
            <table>
              <caption>
                Prices from the price book of {cost?.priceBookDate} ({cost?.currency})
              </caption>
              <thead>
                <tr>
                  <th scope="col">Item</th>
                  <th scope="col">Quantity</th>
                  <th scope="col">Unit price</th>
                  <th scope="col">Monthly</th>
                  <th scope="col">Note</th>
                </tr>
              </thead>
              <tbody>
                {(cost?.lines ?? []).map((l) => (
                  <tr>
                    <td>{l.item}</td>
                    <td>
                      {l.quantity} {l.unit}
                    </td>
                    <td>{l.known ? l.unitPrice : 'unknown'}</td>
                    <td>{l.known && l.monthly != null ? l.monthly.toFixed(2) : 'unknown'}</td>
                    <td>{l.note ?? ''}</td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row">Total</th>
                  <td colSpan={2}></td>
                  <td>{(cost?.total ?? 0).toFixed(2)}</td>
                  <td></td>
                </tr>
              </tfoot>
            </table>
          </div>
          {(cost?.assumptions ?? []).length > 0 && (
            <ul aria-label="Cost assumptions">
              {(cost?.assumptions ?? []).map((a) => (
                <li>{a}</li>
              ))}
            </ul>
          )}
        </>
      )}
    </>
  );
}
