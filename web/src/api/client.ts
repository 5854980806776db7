// The API client. Every shape comes from the generated schema (npm run gen reads the server's
// OpenAPI document), so a change in the API's shape breaks this build, not the running console.
import type { components, operations, paths } from './schema';

type S = components['schemas'];
export type Job = S['JobJob'];
export type Step = S['JobStepRecord'];
export type CatalogType = S['CatalogType'];
export type Space = S['StoreSpace'];
export type Account = S['StoreCloudAccount'];
export type Database = S['DatastoreDatabase'];
export type Connection = S['DatastoreConnection'];
export type AuditEntry = S['AuditEntry'];
export type AuditPage = S['ApiAuditPage'];
export type Component = S['ApiComponentList'];
export type FieldError = S['ApiFieldError'];
export type ProblemBody = S['ApiProblem'];
export type Plan = S['PlanPlan'];
export type Discovered = S['DiscoveryItem'];
export type Remediation = S['ApiRemediationJob'];
export type RemediationStep = S['ApiRemediationStep'];
export type RemediationEvent = S['RemediationEvent'];

type Body<P extends keyof paths, M extends 'post' | 'patch'> = paths[P][M] extends {
  requestBody?: { content: { 'application/json': infer B } };
}
  ? B
  : never;
export type CreateJob = Body<'/api/provisioning-jobs', 'post'>;
export type PatchJob = Body<'/api/provisioning-jobs/{id}', 'patch'>;
export type Decision = Body<'/api/remediation-jobs/{id}/steps-by-id/{stepID}/approve', 'post'>;
export type CreateSpace = Body<'/api/spaces', 'post'>;
export type CreateDatabase = Body<'/api/provisioning-jobs/{id}/databases', 'post'>;
export type CreateConnection = Body<'/api/provisioning-jobs/{id}/connections', 'post'>;
export type InstallComponent = Body<'/api/provisioning-jobs/install-component', 'post'>;
export type Reveal = Body<'/api/secrets/reveal', 'post'>;
export type RevealAnswer = S['ApiRevealAnswer'];
export type JobQuery = NonNullable<paths['/api/provisioning-jobs']['get']['parameters']['query']>;
export type AuditQuery = NonNullable<paths['/api/audit-logs']['get']['parameters']['query']>;
export type RemediationQuery = NonNullable<paths['/api/remediation-jobs']['get']['parameters']['query']>;
export type DiscoveryKind = operations['getSpacesIdDiscoveryKind']['parameters']['path']['kind'];

const tokenKey = 'groundwork.token';

// The token lives in sessionStorage: it is gone when the tab closes, and other tabs never see it.
export const session = {
  get: (): string | null => sessionStorage.getItem(tokenKey),
  set: (t: string) => sessionStorage.setItem(tokenKey, t),
  clear: () => sessionStorage.removeItem(tokenKey),
};

/** ApiError is a problem the server answered (RFC 9457), or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: ProblemBody,
  ) {
    super(problem.detail || problem.title || `HTTP ${status}`);
  }
  /** fields maps a field name (e.g. "config.name") to the server's message about it. */
  fields(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const e of this.problem.errors ?? []) if (e.field) out[e.field] = e.message ?? e.rule ?? 'invalid';
    return out;
  }
}

let onUnauthorized: () => void = () => {};
export function whenUnauthorized(f: () => void) {
  onUnauthorized = f;
}

function query(q?: Record<string, unknown>): string {
  if (!q) return '';
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

export async function call<T>(method: string, path: string, body?: unknown, token = session.get()): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: {
        Authorization: `Bearer ${token ?? ''}`,
        Accept: 'application/json',
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, { title: 'Network error', detail: `the server could not be reached (${String(e)})` });
  }
  if (res.status === 401 && token === session.get()) onUnauthorized();
  const text = await res.text();
  const data = text ? JSON.parse(text) : undefined;
  if (!res.ok) throw new ApiError(res.status, (data as ProblemBody) ?? { title: res.statusText, status: res.status });
  return data as T;
}

type List<T> = { data?: T[] | null; nextCursor?: string };
const jobPath = (id: string): string => `/api/provisioning-jobs/${encodeURIComponent(id)}`;
const remediationPath = (id: string): string => `/api/remediation-jobs/${encodeURIComponent(id)}`;

export const api = {
  types: () => call<S['ApiTypeList']>('GET', '/api/catalog/types'),
  spaces: () => call<S['ApiSpaceList']>('GET', '/api/spaces'),
  createSpace: (b: CreateSpace) => call<Space>('POST', '/api/spaces', b),
  accounts: () => call<S['ApiAccountList']>('GET', '/api/cloud-accounts'),
  jobs: (q: JobQuery) => call<S['ApiJobList']>('GET', '/api/provisioning-jobs' + query(q)),
  job: (id: string) => call<Job>('GET', jobPath(id)),
  createJob: (b: CreateJob) => call<Job>('POST', '/api/provisioning-jobs', b),
  patchJob: (id: string, b: PatchJob) => call<Job>('PATCH', jobPath(id), b),
  deleteJob: (id: string) => call<Job>('DELETE', jobPath(id)),
  retryJob: (id: string) => call<Job>('POST', jobPath(id) + '/retry'),
  databases: (id: string) => call<List<Database>>('GET', jobPath(id) + '/databases'),
  createDatabase: (id: string, b: CreateDatabase) =>
    call<Database>('POST', jobPath(id) + '/databases', b),
  connections: (id: string) => call<List<Connection>>('GET', jobPath(id) + '/connections'),
  databaseConnections: (id: string, dbID: string) =>
    call<List<Connection>>('GET', `${jobPath(id)}/databases/${encodeURIComponent(dbID)}/connections`),
  createDatabaseConnection: (id: string, dbID: string, b: CreateConnection) =>
    call<Connection>('POST', `${jobPath(id)}/databases/${encodeURIComponent(dbID)}/connections`, b),
  reveal: (b: Reveal) => call<RevealAnswer>('POST', '/api/secrets/reveal', b),
  audit: (q: AuditQuery) => call<AuditPage>('GET', '/api/audit-logs' + query(q)),
  auditExportURL: (q: AuditQuery) => '/api/audit-logs' + query(q),
  components: () => call<Component>('GET', '/api/catalog/components'),
  installComponent: (b: InstallComponent) => call<Job>('POST', '/api/provisioning-jobs/install-component', b),
  plan: (b: CreateJob) => call<Plan>('POST', '/api/provisioning-jobs/plan', b),
  discovery: (spaceID: string, kind: DiscoveryKind) =>
    call<S['DiscoveryPage']>('GET', `/api/spaces/${encodeURIComponent(spaceID)}/discovery/${kind}`),
  remediations: (q: RemediationQuery) => call<S['ApiRemediationList']>('GET', '/api/remediation-jobs' + query(q)),
  remediation: (id: string) => call<Remediation>('GET', remediationPath(id)),
  remediationTimeline: (id: string) => call<S['ApiRemediationTimeline']>('GET', remediationPath(id) + '/audit'),
  cancelRemediation: (id: string) => call<Remediation>('POST', remediationPath(id) + '/cancel'),
  decide: (id: string, stepID: string, verdict: 'approve' | 'reject', b: Decision) =>
    call<Remediation>('POST', `${remediationPath(id)}/steps-by-id/${encodeURIComponent(stepID)}/${verdict}`, b),
};

/** allowed is false when the server refuses the call for the token's role (401 or 403). */
async function allowed(method: string, path: string, body?: unknown): Promise<boolean> {
  try {
    await call(method, path, body);
    return true;
  } catch (e) {
    return !(e instanceof ApiError && (e.status === 403 || e.status === 401));
  }
}

/**
 * may tells whether the token holds a permission without changing anything: the server
 * authorises a route before it reads the body, so an empty body to a create route answers
 * 403 without the permission and 400 (the body is invalid) with it.
 */
export const may = (path: '/api/provisioning-jobs' | '/api/spaces') => allowed('POST', path, {});

// A job id that does not exist: a route that needs a permission answers 403 without it and
// 404 with it, and nothing is changed either way.
const none = 'job_00000000000000000000000000';

/**
 * mayChangeJobs tells whether the token may update (retry, VM operations) and delete (cancel,
 * tear down) jobs, asking about a job that does not exist.
 */
export async function mayChangeJobs(): Promise<{ update: boolean; remove: boolean }> {
  const [update, remove] = await Promise.all([allowed('POST', jobPath(none) + '/retry'), allowed('DELETE', jobPath(none))]);
  return { update, remove };
}

export const mayRead = (path: string) => allowed('GET', path);

/**
 * mayRemediate tells what the token may do with remediation workflows. view needs a real
 * answer (a server without the routes answers 404); approve and cancel are asked about a
 * workflow that does not exist, like mayChangeJobs.
 */
export async function mayRemediate(): Promise<{ view: boolean; approve: boolean; cancel: boolean }> {
  const view = await call('GET', '/api/remediation-jobs?limit=1').then(
    () => true,
    () => false,
  );
  if (!view) return { view, approve: false, cancel: false };
  const [approve, cancel] = await Promise.all([
    allowed('POST', remediationPath(none) + '/steps-by-id/none/approve'),
    allowed('POST', remediationPath(none) + '/cancel'),
  ]);
  return { view, approve, cancel };
}
