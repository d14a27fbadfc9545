// cli/config.ts -- where `mo` finds the cluster: `--config FILE` or
// MO_CONFIG (default ./.mo/config.json, which `npm start` writes as
// {"servers": [...], "token": "..."}), overridden field by field by
// MO_SERVER (comma-separated URLs) and MO_TOKEN.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { RequestError } from './errors.ts';

export const DEFAULT_CONFIG_PATH = '.mo/config.json';

export interface CliConfig {
  /** Base URLs (`http://127.0.0.1:7001`), in the order to try them. */
  servers: string[];
  token?: string;
}

export interface ConfigSources {
  /** The value of --config, if given. */
  configFlag?: string;
  env: Record<string, string | undefined>;
  cwd: string;
}

/** `127.0.0.1:7001` -> `http://127.0.0.1:7001`; throws on what is not a URL. */
export function normalizeServer(raw: string, from: string): string {
  const trimmed = raw.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) ? trimmed : `http://${trimmed}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new RequestError(`${from}: "${raw}" is not a server URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new RequestError(`${from}: "${raw}" is not an http(s) URL`);
  }
  return url.origin + url.pathname.replace(/\/+$/, '');
}

function readConfigFile(path: string, mustExist: boolean): Partial<CliConfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !mustExist) return {};
    throw new RequestError(`cannot read config ${path}: ${code ?? (err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new RequestError(`config ${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new RequestError(`config ${path} must be a JSON object {"servers": [...], "token": "..."}`);
  }
  const obj = parsed as Record<string, unknown>;
  const out: Partial<CliConfig> = {};
  if (obj.servers !== undefined) {
    if (!Array.isArray(obj.servers) || !obj.servers.every((s) => typeof s === 'string')) {
      throw new RequestError(`config ${path}: "servers" must be a list of URLs`);
    }
    out.servers = obj.servers.map((s: string) => normalizeServer(s, `config ${path}`));
  }
  if (obj.token !== undefined) {
    if (typeof obj.token !== 'string') throw new RequestError(`config ${path}: "token" must be a string`);
    out.token = obj.token;
  }
  return out;
}

export function loadConfig(src: ConfigSources): CliConfig {
  const explicit = src.configFlag ?? (src.env.MO_CONFIG || undefined);
  const envServers = src.env.MO_SERVER?.trim() ? src.env.MO_SERVER : undefined;
  const envToken = src.env.MO_TOKEN !== undefined && src.env.MO_TOKEN !== '' ? src.env.MO_TOKEN : undefined;

  // The file is read when named, or when the environment leaves something open.
  let file: Partial<CliConfig> = {};
  const path = resolve(src.cwd, explicit ?? DEFAULT_CONFIG_PATH);
  if (explicit !== undefined || envServers === undefined || envToken === undefined) {
    file = readConfigFile(path, explicit !== undefined);
  }

  const servers = envServers
    ? envServers
        .split(',')
        .filter((s) => s.trim() !== '')
        .map((s) => normalizeServer(s, 'MO_SERVER'))
    : (file.servers ?? []);
  if (servers.length === 0) {
    throw new RequestError(`no servers configured: set MO_SERVER or write ${path} (npm start writes it)`);
  }
  return { servers, token: envToken ?? file.token };
}
