import { useEffect, useState } from 'preact/hooks';
import { api, type CatalogType, type Component, type Space } from '../api/client';
import type { Caps } from '../main';
import { describedBy, ErrorNote, Field, fieldErrors, go } from '../ui';

export function CatalogPage({ caps }: { caps: Caps }) {
  const [types, setTypes] = useState<CatalogType[]>([]);
  const [comps, setComps] = useState<NonNullable<Component['data']>>([]);
  const [err, setErr] = useState<unknown>(null);
  const [spaces, setSpaces] = useState<Space[]>([]);
  const [installing, setInstalling] = useState('');
  useEffect(() => {
    api.spaces().then((r) => setSpaces(r.data ?? []), setErr);
    api.types().then((t) => setTypes(t.data ?? []), setErr);
    // The component catalog is served only when the server runs the component family.
    api.components().then((c) => setComps(c.data ?? []), () => setComps([]));
  }, []);
  return (
    <>
      <h1>Catalog</h1>
      <ErrorNote error={err} />
      <h2>Resource types</h2>
      <div class="table-wrap" tabIndex={0} role="region" aria-label="Resource types">
        <table>
          <thead>
            <tr>
              <th scope="col">Type</th>
              <th scope="col">Title</th>
              <th scope="col">Outputs</th>
            </tr>
          </thead>
          <tbody>
            {types.map((t) => (
              <tr key={`${t.kind}/${t.type}`}>
                <td>
                  <code>
                    {t.kind}/{t.type}
                  </code>
                </td>
                <td>{t.title}</td>
                <td>{(t.outputs ?? []).map((o) => o.name).join(', ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <h2>Helm components</h2>
      {comps.length === 0 ? (
        <p>No components offered by this server.</p>
      ) : (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Helm components">
          <table>
            <thead>
              <tr>
                <th scope="col">Component</th>
                <th scope="col">Version</th>
                <th scope="col">Category</th>
                <th scope="col">Description</th>
                {caps.create && <th scope="col">Install</th>}
              </tr>
            </thead>
            <tbody>
              {comps.map((c) => (
                <tr key={c.id}>
                  <td>{c.name}</td>
                  <td>{c.version}</td>
                  <td>{c.category}</td>
                  <td>{c.description}</td>
                  {caps.create && (
                    <td>
                      <button type="button" aria-label={`Install ${c.name}`} onClick={() => setInstalling(c.id ?? '')}>
                        Install…
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {installing && <Install id={installing} spaces={spaces} onCancel={() => setInstalling('')} />}
    </>
  );
}

// Install puts a component into a space that is a registered Kubernetes cluster; the server
// says so, under the field, when the chosen space is not one.
function Install({ id, spaces, onCancel }: { id: string; spaces: Space[]; onCancel: () => void }) {
  const [spaceID, setSpaceID] = useState(spaces[0]?.id ?? '');
  const [name, setName] = useState('');
  const [namespace, setNamespace] = useState('');
  const [fieldErr, setFieldErr] = useState<Record<string, string>>({});
  const [err, setErr] = useState<unknown>(null);
  return (
    <form
      class="inline-form"
      aria-label={`Install ${id}`}
      onSubmit={async (e) => {
        e.preventDefault();
        setErr(null);
        setFieldErr({});
        try {
          const j = await api.installComponent({ componentID: id, spaceID, name: name || undefined, namespace: namespace || undefined });
          go(`jobs/${j.id}`);
        } catch (x) {
          // The refusal is shown whole, and each field's part under its field too.
          setFieldErr(fieldErrors(x).fields);
          setErr(x);
        }
      }}
    >
      <h2>Install {id}</h2>
      <Field id="inst-space" label="Cluster space" error={fieldErr['spaceID']}>
        <select id="inst-space" value={spaceID} onChange={(e) => setSpaceID(e.currentTarget.value)} aria-describedby={describedBy('inst-space', undefined, fieldErr['spaceID'])}>
          {spaces.map((s) => (
            <option value={s.id}>
              {s.name} ({s.provider}, {s.spaceType})
            </option>
          ))}
        </select>
      </Field>
      <Field id="inst-name" label="Release name (optional)" error={fieldErr['name']}>
        <input id="inst-name" value={name} onInput={(e) => setName(e.currentTarget.value)} aria-describedby={describedBy('inst-name', undefined, fieldErr['name'])} />
      </Field>
      <Field id="inst-ns" label="Namespace (optional)" error={fieldErr['namespace']}>
        <input id="inst-ns" value={namespace} onInput={(e) => setNamespace(e.currentTarget.value)} aria-describedby={describedBy('inst-ns', undefined, fieldErr['namespace'])} />
      </Field>
      <button type="submit" class="primary">
        Install
      </button>{' '}
      <button type="button" onClick={onCancel}>
        Close
      </button>
      <ErrorNote error={err} />
    </form>
  );
}
