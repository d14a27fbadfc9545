// control-plane/kube/certs.ts -- the cluster CA and the serving certificates
// of the Kubernetes API (docs/kubernetes-api.md, "TLS"). The CA is made once,
// at the first start, in a directory every replica of one cluster shares
// (`npm start`'s data dir; a shared volume in compose): `ca.key` holds its
// private key and certificate (mode 0600), `ca.crt` the certificate alone,
// for clients. Several replicas starting at once agree on one CA: the key
// file is published with link(2), which fails when it exists, and a loser
// reads the winner's. Every replica signs a fresh serving certificate with
// it at each start, for its own names and addresses (never written to disk).
// RSA keys come from node:crypto (native, fast); node-forge builds and signs
// the X.509 certificates.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import forge from 'node-forge';

export const CA_KEY_FILE = 'ca.key';
export const CA_CERT_FILE = 'ca.crt';
const CA_YEARS = 10;
const SERVING_DAYS = 365;

export interface Ca {
  certPem: string;
  keyPem: string;
}

function rsaKeyPem(): string {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
}

function serial(): string {
  // Positive (top bit clear) 16-byte serial, as RFC 5280 asks.
  const b = crypto.randomBytes(16);
  b[0] &= 0x7f;
  return b.toString('hex');
}

function makeCa(commonName: string, now: Date): Ca {
  const keyPem = rsaKeyPem();
  const key = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.setRsaPublicKey(key.n, key.e);
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(now.getTime() - 60_000);
  cert.validity.notAfter = new Date(now.getTime() + CA_YEARS * 365 * 86400_000);
  const subject = [{ name: 'commonName', value: commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(key, forge.md.sha256.create());
  return { certPem: pem(forge.pki.certificateToPem(cert)), keyPem };
}

/** forge writes PEM with CRLF line ends; files and comparisons use LF. */
function pem(text: string): string {
  return text.replace(/\r\n/g, '\n');
}

/** Splits `ca.key`'s text (private key + certificate) into its parts; throws naming the file when either is missing. */
function parseCaFile(text: string, file: string): Ca {
  const key = /-----BEGIN RSA PRIVATE KEY-----[\s\S]+?-----END RSA PRIVATE KEY-----/.exec(text);
  const cert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(text);
  if (!key || !cert) throw new Error(`${file} does not hold an RSA private key and a certificate (delete it, and ${CA_CERT_FILE}, to make a new CA)`);
  return { keyPem: key[0] + '\n', certPem: cert[0] + '\n' };
}

/**
 * The cluster CA of `dir`: read, or made and published there on the first
 * call (by whichever of several concurrent callers links its file first).
 * Also (re)writes `dir/ca.crt` when it is missing.
 */
export function ensureCa(dir: string, commonName = 'mini-orchestrator-ca'): Ca {
  fs.mkdirSync(dir, { recursive: true });
  const keyFile = path.join(dir, CA_KEY_FILE);
  let ca: Ca;
  if (fs.existsSync(keyFile)) ca = parseCaFile(fs.readFileSync(keyFile, 'utf8'), keyFile);
  else {
    const made = makeCa(commonName, new Date());
    const tmp = path.join(dir, `.${CA_KEY_FILE}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`);
    fs.writeFileSync(tmp, made.keyPem + made.certPem, { mode: 0o600 });
    try {
      fs.linkSync(tmp, keyFile);
      ca = made;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      ca = parseCaFile(fs.readFileSync(keyFile, 'utf8'), keyFile);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }
  const certFile = path.join(dir, CA_CERT_FILE);
  if (!fs.existsSync(certFile) || fs.readFileSync(certFile, 'utf8') !== ca.certPem) {
    const tmp = `${certFile}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, ca.certPem, { mode: 0o644 });
    fs.renameSync(tmp, certFile);
  }
  return ca;
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** A serving certificate signed by `ca` for `names` (DNS names and IP addresses, as given). */
export function servingCert(ca: Ca, commonName: string, names: readonly string[], now = new Date()): { certPem: string; keyPem: string } {
  const caKey = forge.pki.privateKeyFromPem(ca.keyPem);
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const keyPem = rsaKeyPem();
  const key = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.setRsaPublicKey(key.n, key.e);
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(now.getTime() - 60_000);
  cert.validity.notAfter = new Date(now.getTime() + SERVING_DAYS * 86400_000);
  cert.setSubject([{ name: 'commonName', value: commonName }]);
  cert.setIssuer(caCert.subject.attributes);
  const altNames = [...new Set(names.filter((n) => n !== '' && n !== '0.0.0.0' && n !== '::'))].map((n) =>
    IPV4.test(n) || n.includes(':') ? { type: 7, ip: n } : { type: 2, value: n },
  );
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
    { name: 'subjectAltName', altNames },
  ]);
  cert.sign(caKey, forge.md.sha256.create());
  return { certPem: pem(forge.pki.certificateToPem(cert)), keyPem };
}
