// The job's event stream. EventSource cannot send an Authorization header, so the stream is
// read with fetch and parsed here (text/event-stream: blocks of "field: value" lines).
import { session, type Job } from './api/client';

const terminal = new Set(['completed', 'failed', 'cancelled', 'deleted', 'draft']);
export const isTerminal = (status?: string) => terminal.has(status ?? '');

/**
 * follow calls onJob with every newer state of the job the server sends until the job ends or
 * stop is called; a dropped stream is resumed after a short pause, from the last event id.
 * States older than version since are skipped: right after a retry or a teardown the stream
 * may first repeat the state from before it, which must neither show nor end the watch.
 */
export function follow(
  id: string,
  onJob: (j: Job) => void,
  onState: (s: 'live' | 'reconnecting' | 'ended') => void,
  since = 0,
): () => void {
  const ctl = new AbortController();
  let lastID = '';
  let delay = 500;
  const run = async () => {
    while (!ctl.signal.aborted) {
      let ended = false;
      try {
        const res = await fetch(`/api/provisioning-jobs/${encodeURIComponent(id)}/events`, {
          headers: {
            Authorization: `Bearer ${session.get() ?? ''}`,
            Accept: 'text/event-stream',
            ...(lastID ? { 'Last-Event-ID': lastID } : {}),
          },
          signal: ctl.signal,
        });
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        onState('live');
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n/g, '\n');
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            let event = 'message';
            const data: string[] = [];
            for (const line of block.split('\n')) {
              const colon = line.indexOf(':');
              const field = colon < 0 ? line : line.slice(0, colon);
              const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
              if (field === 'event') event = val;
              else if (field === 'data') data.push(val);
              else if (field === 'id') lastID = val;
            }
            if (event === 'job' && data.length) {
              const j = JSON.parse(data.join('\n')) as Job;
              if ((j.version ?? 0) < since) continue;
              since = j.version ?? since;
              onJob(j);
              if (isTerminal(j.status)) ended = true;
            }
          }
        }
      } catch {
        if (ctl.signal.aborted) return;
      }
      if (ended) {
        onState('ended');
        return;
      }
      onState('reconnecting');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  };
  void run();
  return () => ctl.abort();
}
