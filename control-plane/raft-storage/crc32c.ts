// control-plane/raft-storage/crc32c.ts -- CRC-32C (Castagnoli), the checksum
// on every write-ahead-log record and snapshot file. Pure: bytes in, number out.
//
// Why Castagnoli and not the zip CRC-32: it is what etcd's WAL, LevelDB and
// ext4 use, it detects more error patterns in short records, and CPUs have an
// instruction for it should we ever go native. This is the plain byte-wise
// table method ("Sarwate"): one 256-entry table, one lookup per byte. Slicing-by-8
// would be faster, but a checksum over a few KiB costs microseconds while the
// fsync that follows costs milliseconds, so clarity wins.

/** Reflected Castagnoli polynomial 0x1EDC6F41. */
const POLY_REFLECTED = 0x82f63b78;

const TABLE: Uint32Array = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY_REFLECTED : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/**
 * CRC-32C of bytes[start, end). `seed` is a previous result, so a checksum can
 * be computed over pieces: crc32c(b, 0, n) === crc32c(b, k, n, crc32c(b, 0, k)).
 * Check value: crc32c of the ASCII bytes "123456789" is 0xE3069283.
 */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length, seed = 0): number {
  let crc = ~seed >>> 0;
  for (let i = start; i < end; i++) crc = TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return ~crc >>> 0;
}
