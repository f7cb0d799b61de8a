// gzip-members.mjs splits a gzip file into its members with Node's zlib, for check.mjs and
// selftest.mjs. A member is parsed by hand only as far as its header (RFC 1952, 10 bytes and
// the optional fields); zlib inflates the deflate data, reports how many bytes it used, and
// gunzipSync then verifies the whole member, CRC32 and length included.
import { readSync } from "node:fs";
import { gunzipSync, inflateRawSync } from "node:zlib";

// gzipMembers yields { start, end, data } for each gzip member of the open file fd of size
// bytes: its byte range [start, end) and its decompressed bytes. It throws on anything that is
// not a complete, CRC-correct gzip member. Only one member is held in memory at a time.
export function* gzipMembers(fd, size) {
  let off = 0;
  while (off < size) {
    let win = 1 << 20;
    let member = null;
    for (;;) {
      const buf = Buffer.alloc(Math.min(win, size - off));
      readSync(fd, buf, 0, buf.length, off);
      try {
        member = { start: off, ...oneMember(buf) };
        member.end += off;
        break;
      } catch (e) {
        if (buf.length < size - off && /unexpected end/.test(e.message)) {
          win *= 4; // the member is longer than the window: read more
          continue;
        }
        throw new Error(`gzip member at byte ${off}: ${e.message}`);
      }
    }
    yield member;
    off = member.end;
  }
}

// oneMember decodes the gzip member at the start of buf, which may hold more bytes after it.
function oneMember(buf) {
  if (buf.length < 18 || buf[0] !== 0x1f || buf[1] !== 0x8b || buf[2] !== 8) {
    throw new Error(buf.length < 18 ? "unexpected end of file" : "not a gzip member header");
  }
  const flg = buf[3];
  let p = 10;
  if (flg & 4) p += 2 + buf.readUInt16LE(p); // FEXTRA
  for (const bit of [8, 16]) { // FNAME, FCOMMENT: zero-terminated
    if (flg & bit) {
      const z = buf.indexOf(0, p);
      if (z < 0) throw new Error("unexpected end of file");
      p = z + 1;
    }
  }
  if (flg & 2) p += 2; // FHCRC
  if (p >= buf.length) throw new Error("unexpected end of file");
  const { engine } = inflateRawSync(buf.subarray(p), { info: true });
  const end = p + engine.bytesWritten + 8; // deflate data + CRC32 + ISIZE
  if (end > buf.length) throw new Error("unexpected end of file");
  return { end, data: gunzipSync(buf.subarray(0, end)) };
}
