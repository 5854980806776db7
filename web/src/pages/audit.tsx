import { useEffect, useState } from 'preact/hooks';
import { api, session, type AuditPage as Page, type AuditQuery } from '../api/client';
import { ErrorNote, fmtTime } from '../ui';

export function AuditPage() {
  const [form, setForm] = useState<AuditQuery>({});
  const [q, setQ] = useState<AuditQuery>({ page: 1, limit: 50 });
  const [page, setPage] = useState<Page | null>(null);
  const [err, setErr] = useState<unknown>(null);
  useEffect(() => {
    api.audit(q).then((p) => (setPage(p), setErr(null)), setErr);
  }, [JSON.stringify(q)]);
  const input = (k: 'action' | 'actor' | 'resourceType' | 'resourceID', label: string) => (
    <div class="field">
      <label for={`a-${k}`}>{label}</label>
      <input id={`a-${k}`} value={form[k] ?? ''} onInput={(e) => setForm({ ...form, [k]: e.currentTarget.value || undefined })} />
    </div>
  );
  const total = page?.total ?? 0;
  const cur = q.page ?? 1;
  const pages = Math.max(1, Math.ceil(total / (q.limit ?? 50)));
  return (
    <>
      <h1>Audit log</h1>
      <form
        class="filters"
        aria-label="Filter the audit log"
        onSubmit={(e) => {
          e.preventDefault();
          setQ({ ...form, page: 1, limit: 50 });
        }}
      >
        {input('action', 'Action')}
        {input('actor', 'Actor')}
        {input('resourceType', 'Resource type')}
        {input('resourceID', 'Resource id')}
        <button type="submit" class="primary">
          Apply filters
        </button>
      </form>
      <p>
        Export every match: <ExportLink q={form} format="csv" /> · <ExportLink q={form} format="ndjson" />
      </p>
      <ErrorNote error={err} />
      {page && (
        <>
          <p aria-live="polite">
            {total} entries · page {cur} of {pages}
          </p>
          <div class="table-wrap" tabIndex={0} role="region" aria-label="Audit entries">
            <table>
              <caption class="sr-only">Audit entries, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Action</th>
                  <th scope="col">Resource</th>
                </tr>
              </thead>
              <tbody>
                {(page.data ?? []).map((a) => (
                  <tr key={a.id}>
                    <td>{fmtTime(a.createdAt)}</td>
                    <td>{a.actor}</td>
                    <td>
                      <code>{a.action}</code>
                    </td>
                    <td>
                      {a.resourceType} <code>{a.resourceID}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div class="pager">
            <button type="button" disabled={cur <= 1} onClick={() => setQ({ ...q, page: cur - 1 })}>
              Previous page
            </button>
            <button type="button" disabled={cur >= pages} onClick={() => setQ({ ...q, page: cur + 1 })}>
              Next page
            </button>
          </div>
        </>
      )}
    </>
  );
}

// The export needs the token, which a plain link cannot send: fetch it and hand the browser a file.
function ExportLink({ q, format }: { q: AuditQuery; format: 'csv' | 'ndjson' }) {
  const [err, setErr] = useState('');
  return (
    <>
      <button
        type="button"
        class="link"
        onClick={async () => {
          setErr('');
          const res = await fetch(api.auditExportURL({ ...q, format }), {
            headers: { Authorization: `Bearer ${session.get() ?? ''}` },
          });
          if (!res.ok) return setErr(`export failed (${res.status})`);
          const url = URL.createObjectURL(await res.blob());
          const a = document.createElement('a');
          a.href = url;
          a.download = `groundwork-audit.${format}`;
          a.click();
          URL.revokeObjectURL(url);
        }}
      >
        {format.toUpperCase()}
      </button>
      {err && <span role="alert"> {err}</span>}
    </>
  );
}
