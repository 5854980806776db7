import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Connection, type Database, type Job, type PatchJob } from '../api/client';
import type { Caps } from '../main';
import { follow, isTerminal } from '../sse';
import { describedBy, ErrorNote, FailureNote, Field, fieldErrors, fmtTime, go, Status, StepsTable } from '../ui';

const active = new Set(['queued', 'running', 'waiting']);

export function JobPage({ id, caps }: { id: string; caps: Caps }) {
  const [job, setJob] = useState<Job | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [live, setLive] = useState<'live' | 'reconnecting' | 'ended' | ''>('');
  const [confirm, setConfirm] = useState('');
  const [asking, setAsking] = useState(false);
  // One event stream at a time: a retry, cancel or teardown starts the job again, and the page
  // follows it from there.
  const stream = useRef<() => void>(() => {});
  const watch = (since?: number) => {
    stream.current();
    stream.current = follow(id, setJob, setLive, since);
  };
  useEffect(() => {
    api.job(id).then((j) => {
      setJob(j);
      if (!isTerminal(j.status)) watch(j.version);
    }, setErr);
    return () => stream.current();
  }, [id]);
  const started = (j: Job) => {
    setJob(j);
    watch(j.version);
  };
  const act = async (f: () => Promise<Job>) => {
    setErr(null);
    try {
      started(await f());
    } catch (e) {
      setErr(e);
    }
  };
  if (!job) return err ? <ErrorNote error={err} /> : <p aria-busy="true">Loading job…</p>;
  const f = job.failure;
  const completed = job.status === 'completed';
  const isDatastore = job.kind === 'datastore';
  return (
    <>
      <p>
        <a href="#/jobs">← All jobs</a>
      </p>
      <div class="page-head">
        <h1>
          {job.name || job.id} <Status status={job.status} />
        </h1>
        <p class="meta">
          {job.kind} · {job.mode} · <code>{job.id}</code> ·{' '}
          <span aria-live="polite">
            {live === 'live' ? 'live updates on' : live === 'reconnecting' ? 'reconnecting…' : live === 'ended' ? 'finished' : ''}
          </span>
        </p>
      </div>
      <div class="actions">
        {job.status === 'draft' && caps.create && (
          <a class="button primary" href={`#/new/${job.id}`}>
            Resume draft
          </a>
        )}
        {active.has(job.status ?? '') && caps.remove && (
          <button type="button" onClick={() => act(() => api.deleteJob(id))}>
            Cancel job
          </button>
        )}
        {(job.status === 'failed' || f?.retryable) && caps.update && (
          <button type="button" onClick={() => act(() => api.retryJob(id))}>
            Retry
          </button>
        )}
        {(completed || job.status === 'failed' || job.status === 'cancelled' || job.status === 'draft') && !asking && caps.remove && (
          <button type="button" class="danger" onClick={() => setAsking(true)}>
            {completed ? 'Tear down…' : 'Delete…'}
          </button>
        )}
      </div>
      {!caps.update && !caps.remove && <p class="note">Your token may view this job but not retry, cancel or tear it down.</p>}
      {asking && (
        <form
          class="confirm"
          aria-label="Confirm teardown"
          onSubmit={(e) => {
            e.preventDefault();
            if (confirm !== job.name) return;
            setAsking(false);
            setConfirm('');
            void act(() => api.deleteJob(id));
          }}
        >
          <p>
            {completed ? 'This destroys everything the job created.' : 'This deletes the job.'} Type its name,{' '}
            <strong>{job.name}</strong>, to confirm.
          </p>
          <Field id="confirm-name" label="Job name">
            <input id="confirm-name" value={confirm} onInput={(e) => setConfirm(e.currentTarget.value)} autocomplete="off" />
          </Field>
          <button type="submit" class="danger" disabled={confirm !== job.name}>
            {completed ? 'Tear down' : 'Delete'}
          </button>{' '}
          <button type="button" onClick={() => (setAsking(false), setConfirm(''))}>
            Keep it
          </button>
        </form>
      )}
      <ErrorNote error={err} />
      <FailureNote failure={f} />
      <section aria-labelledby="steps-h">
        <h2 id="steps-h">Steps</h2>
        <StepsTable rows={(job.steps ?? []).map((s) => ({ name: s.name, status: s.status, record: s }))} />
      </section>
      {job.kind === 'vm_pool' && caps.update && <VMPool job={job} onStarted={started} />}
      {isDatastore && completed && <Datastore job={job} caps={caps} />}
      <section aria-labelledby="config-h">
        <h2 id="config-h">Configuration</h2>
        <pre tabIndex={0} aria-label="Job configuration">{JSON.stringify(job.config, null, 2)}</pre>
      </section>
      <section aria-labelledby="infra-h">
        <h2 id="infra-h">Infrastructure outputs</h2>
        <pre tabIndex={0} aria-label="Infrastructure outputs">{JSON.stringify(job.infra, null, 2)}</pre>
        <p class="meta">
          Created {fmtTime(job.createdAt)} · updated {fmtTime(job.updatedAt)}
        </p>
      </section>
      <button type="button" class="link" onClick={() => go('jobs')}>
        Back to jobs
      </button>
    </>
  );
}

type Sizes = { min: string; max: string; desired: string };

// The operations PATCH /api/provisioning-jobs/{id} runs on a completed VM pool: attach or detach
// its load balancer, and resize an ASG pool in place. Each is confirmed first; the job then runs
// its finalize step again, which the page follows live like any run.
function VMPool({ job, onStarted }: { job: Job; onStarted: (j: Job) => void }) {
  const cfg = (job.config ?? {}) as Record<string, unknown>;
  const infra = (job.infra ?? {}) as Record<string, unknown>;
  const num = (k: string) => (typeof cfg[k] === 'number' ? String(cfg[k]) : '');
  const [sizes, setSizes] = useState<Sizes>({ min: num('min'), max: num('max'), desired: num('desired') });
  const [asking, setAsking] = useState<{ what: string; yes: string; body: PatchJob } | null>(null);
  const [fieldErr, setFieldErr] = useState<Record<string, string>>({});
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const ready = job.status === 'completed';
  const hasLB = !!infra['loadBalancer'];
  const asg = cfg['mode'] === 'asg';
  const why = !ready ? `VM operations need a completed job; this one is ${job.status}.` : '';
  const lbWhy = why || (!hasLB ? 'The pool has no load balancer: it was created without createLoadBalancer.' : '');
  const sizeWhy = why || (!asg ? `Only an ASG pool (mode asg) resizes in place; this one is ${String(cfg['mode'] ?? 'fixed')}.` : '');
  const confirm = async () => {
    if (!asking) return;
    setBusy(true);
    setErr(null);
    setFieldErr({});
    try {
      const j = await api.patchJob(job.id!, { ...asking.body, version: job.version });
      setAsking(null);
      onStarted(j);
    } catch (x) {
      const { fields, rest } = fieldErrors(x);
      setFieldErr(fields);
      setErr(rest);
      setAsking(null);
    } finally {
      setBusy(false);
    }
  };
  const size = (k: keyof Sizes, label: string) => (
    <Field id={`vm-${k}`} label={label} error={fieldErr[k]}>
      <input
        id={`vm-${k}`}
        type="number"
        inputMode="numeric"
        min={0}
        value={sizes[k]}
        disabled={!!sizeWhy}
        onInput={(e) => setSizes({ ...sizes, [k]: e.currentTarget.value })}
        aria-invalid={fieldErr[k] ? true : undefined}
        aria-describedby={describedBy(`vm-${k}`, undefined, fieldErr[k])}
      />
    </Field>
  );
  const sized = (k: keyof Sizes) => (sizes[k] === '' ? undefined : Number(sizes[k]));
  return (
    <section aria-labelledby="vm-h" class="vm-ops">
      <h2 id="vm-h">VM pool operations</h2>
      <p>
        Load balancer: {hasLB ? (infra['lbAttached'] === true ? 'attached' : 'detached') : 'none'} · mode {String(cfg['mode'] ?? 'fixed')}
      </p>
      <div class="actions" role="group" aria-labelledby="vm-h" aria-describedby={lbWhy ? 'vm-lb-why' : undefined}>
        <button
          type="button"
          disabled={!!lbWhy || busy}
          onClick={() => setAsking({ what: "Attach the load balancer to the pool's instances?", yes: 'Yes, attach', body: { vmOp: 'attach_lb' } })}
        >
          Attach load balancer…
        </button>
        <button
          type="button"
          disabled={!!lbWhy || busy}
          onClick={() =>
            setAsking({ what: "Detach the load balancer from the pool's instances? It stops sending them traffic.", yes: 'Yes, detach', body: { vmOp: 'detach_lb' } })
          }
        >
          Detach load balancer…
        </button>
      </div>
      {lbWhy && (
        <p class="note" id="vm-lb-why">
          {lbWhy}
        </p>
      )}
      {fieldErr['vmOp'] && (
        <p class="field-error" id="vm-op-error" role="alert">
          {fieldErr['vmOp']}
        </p>
      )}
      <form
        class="inline-form"
        aria-label="Resize the pool"
        onSubmit={(e) => {
          e.preventDefault();
          const body = { min: sized('min'), max: sized('max'), desired: sized('desired') };
          setAsking({ what: `Resize the pool to min ${sizes.min || '(unchanged)'}, max ${sizes.max || '(unchanged)'}, desired ${sizes.desired || '(unchanged)'}?`, yes: 'Yes, resize', body });
        }}
      >
        <h3>Resize</h3>
        {sizeWhy && <p class="note">{sizeWhy}</p>}
        {size('min', 'Minimum')}
        {size('max', 'Maximum')}
        {size('desired', 'Desired')}
        <button type="submit" disabled={!!sizeWhy || busy}>
          Resize…
        </button>
      </form>
      {asking && (
        <div class="confirm" role="group" aria-label="Confirm the VM operation">
          <p>{asking.what} The job runs its finalize step again.</p>
          <button type="button" class="danger" disabled={busy} onClick={confirm}>
            {asking.yes}
          </button>{' '}
          <button type="button" onClick={() => setAsking(null)}>
            No
          </button>
        </div>
      )}
      <ErrorNote error={err} />
    </section>
  );
}

function Datastore({ job, caps }: { job: Job; caps: Caps }) {
  const [dbs, setDbs] = useState<Database[]>([]);
  const [conns, setConns] = useState<Connection[]>([]);
  const [name, setName] = useState('');
  const [owner, setOwner] = useState('');
  const [fieldErr, setFieldErr] = useState<Record<string, string>>({});
  const [err, setErr] = useState<unknown>(null);
  const id = job.id!;
  const reload = async () => {
    try {
      const [d, c] = await Promise.all([api.databases(id), api.connections(id)]);
      const per = await Promise.all((d.data ?? []).filter((x) => x.status === 'ready').map((x) => api.databaseConnections(id, x.id!)));
      setDbs(d.data ?? []);
      setConns([...(c.data ?? []), ...per.flatMap((p) => p.data ?? [])]);
    } catch (x) {
      setErr(x);
    }
  };
  useEffect(() => {
    void reload();
  }, [id]);
  // A database is made in the background: look again until none is still being created.
  useEffect(() => {
    if (!dbs.some((d) => d.status === 'creating')) return;
    const t = setTimeout(reload, 1000);
    return () => clearTimeout(t);
  }, [dbs]);
  return (
    <section aria-labelledby="ds-h">
      <h2 id="ds-h">Databases and connections</h2>
      <ErrorNote error={err} />
      {dbs.length === 0 ? (
        <p>No databases yet.</p>
      ) : (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Databases">
          <table>
            <caption class="sr-only">Databases</caption>
            <thead>
              <tr>
                <th scope="col">Database</th>
                <th scope="col">Owner</th>
                <th scope="col">Status</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {dbs.map((d) => (
                <tr key={d.id} data-database={d.name}>
                  <td>{d.name}</td>
                  <td>{d.owner}</td>
                  <td>
                    <Status status={d.status} />
                  </td>
                  <td>{d.connection ? <code>{endpoint(d.connection)}</code> : '—'}</td>
                  <td>
                    {caps.create && d.status === 'ready' && (
                      <button
                        type="button"
                        aria-label={`New connection to ${d.name}`}
                        onClick={async () => {
                          setErr(null);
                          try {
                            await api.createDatabaseConnection(id, d.id!, {});
                            await reload();
                          } catch (x) {
                            setErr(x);
                          }
                        }}
                      >
                        New connection
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {conns.length > 0 && (
        <>
          <h3>Connections</h3>
          <ul class="connections">
            {conns.map((c) => (
              <ConnectionItem key={c.id} c={c} dbName={dbs.find((d) => d.id === c.databaseID)?.name} onError={setErr} />
            ))}
          </ul>
        </>
      )}
      {caps.create && (
        <form
          aria-label="Create a database"
          class="inline-form"
          onSubmit={async (e) => {
            e.preventDefault();
            setFieldErr({});
            setErr(null);
            try {
              await api.createDatabase(id, { name, owner });
              setName('');
              setOwner('');
              await reload();
            } catch (x) {
              const { fields, rest } = fieldErrors(x);
              setFieldErr(fields);
              setErr(rest);
            }
          }}
        >
          <h3>Create a database</h3>
          <Field id="db-name" label="Database name" error={fieldErr['name']}>
            <input id="db-name" value={name} required onInput={(e) => setName(e.currentTarget.value)} aria-describedby={describedBy('db-name', undefined, fieldErr['name'])} />
          </Field>
          <Field id="db-owner" label="Owner" error={fieldErr['owner']} hint="the role that owns the database">
            <input id="db-owner" value={owner} required onInput={(e) => setOwner(e.currentTarget.value)} aria-describedby={describedBy('db-owner', 'h', fieldErr['owner'])} />
          </Field>
          <button type="submit" class="primary">
            Create database
          </button>
        </form>
      )}
    </section>
  );
}

// A connection's password is shown only on purpose, after a confirmation; the server writes
// the reveal to the audit log under the caller's name.
function ConnectionItem({ c, dbName, onError }: { c: Connection; dbName?: string; onError: (e: unknown) => void }) {
  const [asking, setAsking] = useState(false);
  const [value, setValue] = useState<string | null>(null);
  const ref = c.connection?.secretRef;
  const label = `${c.name || c.id}${dbName ? ` (database ${dbName})` : ''}`;
  return (
    <li data-connection={c.id}>
      {label}: {c.connection ? <code>{endpoint(c.connection)}</code> : '—'}{' '}
      {ref &&
        (value !== null ? (
          <>
            <label for={`pw-${c.id}`}>Password</label> <input id={`pw-${c.id}`} class="secret-value" readOnly value={value} />{' '}
            <button type="button" onClick={() => setValue(null)}>
              Hide
            </button>
          </>
        ) : asking ? (
          <span role="group" aria-label={`Confirm revealing the password of ${label}`}>
            Reveal the password? The reveal is written to the audit log.{' '}
            <button
              type="button"
              class="danger"
              onClick={async () => {
                setAsking(false);
                try {
                  setValue((await api.reveal({ ref })).value ?? '');
                } catch (x) {
                  onError(x);
                }
              }}
            >
              Yes, reveal
            </button>{' '}
            <button type="button" onClick={() => setAsking(false)}>
              No
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => setAsking(true)}>
            Reveal password…
          </button>
        ))}
    </li>
  );
}

function endpoint(e: NonNullable<Database['connection']>): string {
  return `${e.user ? e.user + '@' : ''}${e.host ?? ''}${e.port ? ':' + e.port : ''}${e.database ? '/' + e.database : ''}`;
}
