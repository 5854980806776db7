// Small shared pieces: the hash router, errors shown as text a person can act on, dates.
import { useEffect, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { ApiError, type Job, type Step } from './api/client';

export function useRoute(): string[] {
  const read = () => (location.hash.replace(/^#\/?/, '') || 'jobs').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

export const go = (path: string) => {
  location.hash = '#/' + path;
};

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : null;
  return (
    <div class="error" role="alert">
      <strong>{e ? `${e.problem.title ?? 'Error'} (${e.status})` : 'Error'}: </strong>
      {e ? e.message : String(error)}
      {e?.problem.fixHint && <p>Fix: {e.problem.fixHint}</p>}
      {e && e.problem.errors?.length ? (
        <ul>
          {e.problem.errors.map((f) => (
            <li key={f.field}>
              <code>{f.field}</code>: {f.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export function fmtTime(t?: string | null): string {
  if (!t) return '—';
  const d = new Date(t);
  return isNaN(d.getTime()) ? t : d.toLocaleString();
}

export function duration(a?: string | null, b?: string | null): string {
  if (!a) return '—';
  const ms = (b ? new Date(b).getTime() : Date.now()) - new Date(a).getTime();
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function Status({ status }: { status?: string }) {
  return <span class={`status status-${status ?? 'unknown'}`}>{status ?? 'unknown'}</span>;
}

export function Field(props: { id: string; label: string; hint?: string; error?: string; children: ComponentChildren }) {
  return (
    <div class={props.error ? 'field invalid' : 'field'}>
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="field-error" id={`${props.id}-error`} role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

/** describedBy names the hint and error of a Field for its control. */
export const describedBy = (id: string, hint?: string, error?: string) =>
  [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;

/** FailureNote is a job's failure: the step, its class, the message, the fix and the provider's console. */
export function FailureNote({ failure: f }: { failure?: Job['failure'] }) {
  if (!f) return null;
  return (
    <section class="failure" aria-labelledby="failure-h">
      <h2 id="failure-h">Failure</h2>
      <dl>
        <dt>Step</dt>
        <dd>{f.step || '—'}</dd>
        <dt>Class</dt>
        <dd>{f.class || '—'}</dd>
        <dt>Message</dt>
        <dd>{f.message}</dd>
        {f.fixHint && (
          <>
            <dt>Fix</dt>
            <dd>{f.fixHint}</dd>
          </>
        )}
        {f.consoleUrl && (
          <>
            <dt>Provider console</dt>
            <dd>
              <a href={f.consoleUrl} rel="noreferrer noopener" target="_blank">
                {f.consoleUrl}
              </a>
            </dd>
          </>
        )}
      </dl>
    </section>
  );
}

/**
 * fieldErrors splits a refusal into the server's per-field messages (shown under their
 * inputs) and whatever is left, shown as a whole.
 */
export function fieldErrors(x: unknown): { fields: Record<string, string>; rest: unknown } {
  if (x instanceof ApiError && x.problem.errors?.length) return { fields: x.fields(), rest: null };
  return { fields: {}, rest: x };
}

/** StepRow is one step of a job's table: its record, and for a workflow its kind and stable id. */
export type StepRow = { name?: string; status?: string; kind?: string; id?: string; record?: Step };

/** StepsTable shows steps with their status, attempts, duration and latest message. */
export function StepsTable({ rows, kinds }: { rows: StepRow[]; kinds?: boolean }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label="Steps">
      <table class="steps">
        <thead>
          <tr>
            <th scope="col">Step</th>
            {kinds && <th scope="col">Kind</th>}
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Duration</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ name, status, kind, id, record: r }) => (
            <tr key={id ?? name} data-step={name} data-step-id={id} data-finished={r?.finishedAt ?? ''}>
              <th scope="row">{name}</th>
              {kinds && <td>{kind}</td>}
              <td>
                <Status status={status} />
              </td>
              <td>{r?.attempts ?? 0}</td>
              <td>{r?.startedAt ? duration(r.startedAt, r.finishedAt) : '—'}</td>
              <td>{r?.error || r?.message || ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

type Page<T> = { data?: T[] | null; nextCursor?: string };

/**
 * usePaged reads a list a page at a time by the API's cursor: load() reads the first page again
 * (and runs whenever deps change), more() appends the next one.
 */
export function usePaged<T>(read: (cursor?: string) => Promise<Page<T>>, deps: unknown[]) {
  const [items, setItems] = useState<T[] | null>(null);
  const [next, setNext] = useState<string | undefined>();
  const [err, setErr] = useState<unknown>(null);
  const load = (cursor?: string) =>
    read(cursor).then((r) => {
      setItems((prev) => (cursor && prev ? [...prev, ...(r.data ?? [])] : (r.data ?? [])));
      setNext(r.nextCursor || undefined);
      setErr(null);
    }, setErr);
  useEffect(() => {
    void load();
  }, deps);
  return { items, next, err, load: () => load(), more: () => (next ? load(next) : Promise.resolve()) };
}

/** MoreButton reads the next page of a usePaged list; it is absent on the last page. */
export function MoreButton({ next, more }: { next?: string; more: () => unknown }) {
  return next ? (
    <button type="button" onClick={() => void more()}>
      Load more
    </button>
  ) : null;
}
