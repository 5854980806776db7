import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { ApiError, call, may, mayChangeJobs, mayRead, mayRemediate, session, whenUnauthorized } from './api/client';
import { ErrorNote, go, useRoute } from './ui';
import { JobsPage } from './pages/jobs';
import { JobPage } from './pages/job';
import { Wizard } from './pages/wizard';
import { AuditPage } from './pages/audit';
import { CatalogPage } from './pages/catalog';
import { RemediationPage, RemediationsPage } from './pages/remediations';

/** Caps is what the signed-in token may do, as the server answers for it. */
export type Caps = {
  create: boolean;
  createSpace: boolean;
  audit: boolean;
  update: boolean;
  remove: boolean;
  remediation: { view: boolean; approve: boolean; cancel: boolean };
};

function SignIn({ onDone }: { onDone: () => void }) {
  const [token, setToken] = useState('');
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr(null);
    try {
      // Any authenticated token may read the type catalog; a 401 means the token is not valid.
      await call('GET', '/api/catalog/types', undefined, token.trim());
      session.set(token.trim());
      onDone();
    } catch (e) {
      setErr(e instanceof ApiError && e.status === 401 ? new Error('That token is not valid (unknown, expired or revoked).') : e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="signin">
      <h1>Sign in to Groundwork</h1>
      <form onSubmit={submit}>
        <div class="field">
          <label for="token">API token</label>
          <input
            id="token"
            type="password"
            autocomplete="off"
            required
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
            aria-describedby="token-hint"
          />
          <p class="hint" id="token-hint">
            Kept only for this browser tab's session. Make one with <code>groundwork tokens create</code>.
          </p>
        </div>
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
      <ErrorNote error={err} />
    </main>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(!!session.get());
  const [caps, setCaps] = useState<Caps | null>(null);
  const route = useRoute();
  useEffect(() => {
    whenUnauthorized(() => {
      session.clear();
      setSignedIn(false);
    });
  }, []);
  useEffect(() => {
    if (!signedIn) return;
    void Promise.all([may('/api/provisioning-jobs'), may('/api/spaces'), mayRead('/api/audit-logs?limit=1'), mayChangeJobs(), mayRemediate()]).then(
      ([create, createSpace, audit, jobs, remediation]) => setCaps({ create, createSpace, audit, ...jobs, remediation }),
    );
  }, [signedIn]);
  if (!signedIn) return <SignIn onDone={() => setSignedIn(true)} />;
  const [page, ...rest] = route;
  const nav = [
    ['jobs', 'Jobs'],
    ...(caps?.create ? [['new', 'New resource']] : []),
    ...(caps?.remediation.view ? [['remediations', 'Remediations']] : []),
    ...(caps?.audit ? [['audit', 'Audit log']] : []),
    ['catalog', 'Catalog'],
  ];
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Groundwork</span>
        <nav aria-label="Main">
          <ul>
            {nav.map(([p, label]) => (
              <li key={p}>
                <a href={`#/${p}`} aria-current={page === p ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button
          type="button"
          class="link"
          onClick={() => {
            session.clear();
            setSignedIn(false);
            go('jobs');
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {caps === null ? (
          <p aria-busy="true">Loading…</p>
        ) : page === 'jobs' && rest[0] ? (
          <JobPage id={rest[0]} caps={caps} />
        ) : page === 'new' ? (
          <Wizard caps={caps} draftID={rest[0]} />
        ) : page === 'remediations' && rest[0] ? (
          <RemediationPage id={rest[0]} caps={caps} />
        ) : page === 'remediations' ? (
          <RemediationsPage />
        ) : page === 'audit' ? (
          <AuditPage />
        ) : page === 'catalog' ? (
          <CatalogPage caps={caps} />
        ) : (
          <JobsPage caps={caps} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
