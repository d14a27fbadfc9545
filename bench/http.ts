// bench/http.ts -- one HTTP request with the answer read as text, over a
// shared keep-alive agent: the load generators of the big-state and etcd
// benchmarks use it, so both sides of a comparison are driven the same way.

import http from 'node:http';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

export interface TextRequest {
  headers?: http.OutgoingHttpHeaders;
  body?: string;
  timeoutMs?: number;
}

export function requestText(method: string, url: string, o: TextRequest = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { ...o.headers };
    if (o.body !== undefined) headers['content-length'] = Buffer.byteLength(o.body);
    const req = http.request(url, { method, agent, timeout: o.timeoutMs ?? 10000, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(o.body);
  });
}
