// shared/random.ts -- the injected source of randomness. Pure modules never
// call Math.random: they receive a Random, so a simulation seeded with S
// replays exactly. SeededRandom is mulberry32 (32-bit state, fast, good
// enough for jitter and schedules; not for cryptography).

export interface Random {
  /** A float in [0, 1). */
  next(): number;
}

export class SeededRandom implements Random {
  private state: number;

  constructor(seed: number) {
    // Force to uint32; a seed of 0 is fine for mulberry32.
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** A uniformly chosen element; throws on an empty array (a caller bug). */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('SeededRandom.pick: empty array');
    return items[this.int(items.length)];
  }
}

const ID_ALPHABET = 'useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict';

/** A nanoid-style id (64-symbol alphabet) drawn from `random`: deterministic under a SeededRandom. */
export function randomId(random: Random, size = 21): string {
  let id = '';
  for (let i = 0; i < size; i++) id += ID_ALPHABET[Math.floor(random.next() * 64) & 63];
  return id;
}
