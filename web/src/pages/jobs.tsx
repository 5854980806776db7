import { useEffect, useState } from 'preact/hooks';
import { api, type JobQuery, type Space } from '../api/client';
import type { Caps } from '../main';
import { ErrorNote, fmtTime, Status, usePaged, MoreButton } from '../ui';

const statuses = ['', 'draft', 'queued', 'running', 'waiting', 'completed', 'failed', 'cancelling', 'cancelled', 'deleting', 'deleted'];
const kinds = ['', 'datastore', 'kubernetes', 'vm_pool', 'network', 'registry', 'dns_zone', 'component'];

export function JobsPage({ caps }: { caps: Caps }) {
  const [q, setQ] = useState<JobQuery>({});
  const [spaces, setSpaces] = useState<Space[]>([]);
  const [spaceErr, setSpaceErr] = useState<unknown>(null);
  useEffect(() => {
    api.spaces().then((r) => setSpaces(r.data ?? []), setSpaceErr);
  }, []);
  const { items: jobs, next, err, load, more } = usePaged((cursor) => api.jobs({ ...q, cursor }), [q.status, q.kind, q.spaceID]);
  const spaceName = (id?: string) => spaces.find((s) => s.id === id)?.name ?? id;
  return (
    <>
      <div class="page-head">
        <h1>Provisioning jobs</h1>
        {caps.create && (
          <a class="button primary" href="#/new">
            New resource
          </a>
        )}
      </div>
      <form class="filters" aria-label="Filter jobs" onSubmit={(e) => e.preventDefault()}>
        <div class="field">
          <label for="f-status">Status</label>
          <select id="f-status" value={q.status ?? ''} onChange={(e) => setQ({ ...q, status: e.currentTarget.value || undefined })}>
            {statuses.map((s) => (
              <option value={s}>{s || 'any'}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="f-kind">Kind</label>
          <select id="f-kind" value={q.kind ?? ''} onChange={(e) => setQ({ ...q, kind: e.currentTarget.value || undefined })}>
            {kinds.map((s) => (
              <option value={s}>{s || 'any'}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="f-space">Space</label>
          <select id="f-space" value={q.spaceID ?? ''} onChange={(e) => setQ({ ...q, spaceID: e.currentTarget.value || undefined })}>
            <option value="">any</option>
            {spaces.map((s) => (
              <option value={s.id}>{s.name}</option>
            ))}
          </select>
        </div>
        <button type="button" onClick={load}>
          Refresh
        </button>
      </form>
      <ErrorNote error={err ?? spaceErr} />
      {jobs === null ? (
        <p aria-busy="true">Loading jobs…</p>
      ) : jobs.length === 0 ? (
        <p>No jobs match.</p>
      ) : (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Jobs">
          <table>
            <caption class="sr-only">Jobs, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Status</th>
                <th scope="col">Space</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {jobs.map((j) => (
                <tr key={j.id}>
                  <td>
                    <a href={`#/jobs/${j.id}`}>{j.name || j.id}</a>
                  </td>
                  <td>{j.kind}</td>
                  <td>
                    <Status status={j.status} />
                  </td>
                  <td>{spaceName(j.spaceID)}</td>
                  <td>{fmtTime(j.createdAt)}</td>
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
