// control-plane/api/dashboard.ts -- the web dashboard's files (dashboard/),
// served by every replica at `/` (and `/ui/*`) without a token: the page
// asks for the token itself and sends it with every API call. Files are read
// once from the project's dashboard/ folder (beside dist/ when running the
// bundles, two levels up when running the sources) and kept in memory.

import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/index.html': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/ui/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/ui/style.css': { file: 'style.css', type: 'text/css; charset=utf-8' },
};

/** No third-party origin; inline style attributes for the bars; API calls may go to any replica. */
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src *; img-src 'self' data:; frame-ancestors 'none'";

/** The dashboard/ folder, or null when this install has none (e.g. a bundle copied alone). */
export function findDashboardDir(): string | null {
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (const dir of [path.resolve(here, '../dashboard'), path.resolve(here, '../../dashboard'), path.resolve(process.cwd(), 'dashboard')]) {
    if (fs.existsSync(path.join(dir, 'index.html'))) return dir;
  }
  return null;
}

export function isDashboardPath(pathname: string): boolean {
  return pathname in FILES || pathname.startsWith('/ui/');
}

/** Serve a dashboard file; returns false when the path is not one (the caller goes on). */
export function makeDashboard(dir: string | null = findDashboardDir()): (req: http.IncomingMessage, res: http.ServerResponse, pathname: string) => boolean {
  const cache = new Map<string, Buffer>();
  return (req, res, pathname) => {
    if (!isDashboardPath(pathname)) return false;
    const entry = FILES[pathname];
    const send = (status: number, type: string, body: Buffer | string, extra: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff', ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(405, 'application/json', JSON.stringify({ error: `${req.method} is not supported on ${pathname} (GET)` }), { allow: 'GET, HEAD' });
      return true;
    }
    if (!entry) {
      send(404, 'application/json', JSON.stringify({ error: `no such file ${pathname}` }));
      return true;
    }
    if (!dir) {
      send(404, 'application/json', JSON.stringify({ error: 'the dashboard is not installed here (no dashboard/ folder beside dist/)' }));
      return true;
    }
    let body = cache.get(entry.file);
    if (!body) {
      try {
        body = fs.readFileSync(path.join(dir, entry.file));
      } catch (e) {
        send(500, 'application/json', JSON.stringify({ error: `cannot read the dashboard: ${(e as Error).message}` }));
        return true;
      }
      cache.set(entry.file, body);
    }
    send(200, entry.type, body, entry.file === 'index.html' ? { 'content-security-policy': CSP } : {});
    return true;
  };
}
