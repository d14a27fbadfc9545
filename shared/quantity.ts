// shared/quantity.ts -- Kubernetes resource quantities ('500m', '1.5', '2Gi',
// '1G', '1e3') to the integers this project counts in: cpu in millicores,
// memory in MiB. Used by the manifest parser, the nodes file and the CLI's
// tables (format*). Pure: exact arithmetic on bigints, no I/O.
//
// Grammar (as Kubernetes' resource.Quantity):
//   quantity ::= number suffix
//   number   ::= '+'? (digits | digits '.' digits? | '.' digits)
//   suffix   ::= '' | binarySI (Ki Mi Gi Ti Pi Ei)
//              | decimalSI (n u m k M G T P E)
//              | ('e' | 'E') signed-integer        (decimal exponent)
// Negative quantities are refused: a request cannot be negative.
//
// Rounding: results are rounded UP to the whole unit, as Kubernetes does when
// it reads a quantity at a coarser precision. So cpu '0.0001' (0.1m) is 1
// millicore and memory '1G' (10^9 bytes = 953.67 MiB) is 954 MiB; a request
// is never quietly made smaller than the user asked for.
//
// Plain numbers follow Kubernetes too: cpu 2 means 2 cores, memory 128974848
// means bytes. (The nodes file, which speaks millicores and MiB, handles its
// own plain numbers before it calls these.)

import { MAX_RESOURCE_AMOUNT } from './protocol/validate.ts';

/** A quantity that is not valid Kubernetes notation, or out of range. */
export class QuantityError extends Error {
  override readonly name = 'QuantityError';
  readonly code = 'INVALID_QUANTITY';
}

/** Longest quantity string we read: bounds the bigint work on hostile input. */
export const MAX_QUANTITY_CHARS = 64;
/** Largest |exponent| in the 'e' notation, for the same reason. */
export const MAX_QUANTITY_EXPONENT = 30;

const QUANTITY = /^\+?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;

const BINARY_POWER: Record<string, bigint> = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL_POWER: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** An exact non-negative rational numerator/denominator. */
interface Fraction {
  num: bigint;
  den: bigint;
}

function render(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > MAX_QUANTITY_CHARS ? `${value.slice(0, MAX_QUANTITY_CHARS)}...` : value);
  if (typeof value === 'number') return String(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : typeof value;
}

function parseQuantity(input: unknown, what: 'cpu' | 'memory', examples: string): Fraction {
  let text: string;
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) {
      throw new QuantityError(`invalid ${what} quantity ${render(input)}: expected a non-negative amount such as ${examples}`);
    }
    text = String(input); // may be '1e+21' or '1.5e-7': both in the grammar
  } else if (typeof input === 'string') {
    text = input;
  } else {
    throw new QuantityError(`invalid ${what} quantity ${render(input)}: expected a string such as ${examples}`);
  }
  const match = text.length <= MAX_QUANTITY_CHARS ? QUANTITY.exec(text) : null;
  if (match === null) {
    const hint = text.startsWith('-') ? 'quantities cannot be negative' : `expected Kubernetes notation such as ${examples}`;
    throw new QuantityError(`invalid ${what} quantity ${render(input)}: ${hint}`);
  }
  const [whole, fraction = ''] = match[1].split('.');
  let num = BigInt(`${whole}${fraction}` || '0');
  let den = 10n ** BigInt(fraction.length);
  const suffix = match[2] ?? '';
  if (suffix in BINARY_POWER) {
    num <<= BINARY_POWER[suffix];
  } else {
    const power = suffix in DECIMAL_POWER ? DECIMAL_POWER[suffix] : suffix === '' ? 0 : Number(suffix.slice(1));
    if (Math.abs(power) > MAX_QUANTITY_EXPONENT) {
      throw new QuantityError(`invalid ${what} quantity ${render(input)}: exponent beyond ±${MAX_QUANTITY_EXPONENT}`);
    }
    if (power >= 0) num *= 10n ** BigInt(power);
    else den *= 10n ** BigInt(-power);
  }
  return { num, den };
}

function ceilDiv(num: bigint, den: bigint): bigint {
  return (num + den - 1n) / den;
}

function toAmount(value: bigint, input: unknown, what: string, unit: string): number {
  if (value > BigInt(MAX_RESOURCE_AMOUNT)) {
    throw new QuantityError(`invalid ${what} quantity ${render(input)}: more than ${MAX_RESOURCE_AMOUNT}${unit}`);
  }
  return Number(value);
}

/** A cpu quantity in millicores, rounded up: '500m' -> 500, '1' -> 1000, '1.5' -> 1500, 2 -> 2000. */
export function parseCpu(input: string | number): number {
  const { num, den } = parseQuantity(input, 'cpu', "'500m', '1', '1.5'");
  return toAmount(ceilDiv(num * 1000n, den), input, 'cpu', 'm');
}

/** A memory quantity in MiB, rounded up: '512Mi' -> 512, '2Gi' -> 2048, '1G' -> 954, 128974848 (bytes) -> 123. */
export function parseMemory(input: string | number): number {
  const { num, den } = parseQuantity(input, 'memory', "'512Mi', '2Gi', '1G'");
  return toAmount(ceilDiv(num, den << 20n), input, 'memory', 'Mi');
}

/** Millicores in Kubernetes notation, always with the 'm' suffix: 1000 -> '1000m'. */
export function formatCpu(millicores: number): string {
  return `${millicores}m`;
}

/** MiB in Kubernetes notation: 2048 -> '2048Mi'. */
export function formatMemory(mebibytes: number): string {
  return `${mebibytes}Mi`;
}
