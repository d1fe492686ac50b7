/* Nested type-length-value records with a planted assertion failure (symfence native example).
 *
 * Input on stdin: a sequence of records: u8 type, u8 length, value. Type 'C' is a container whose
 * value is parsed as records again (depth <= 3); type 'I' holds a u32 big-endian integer.
 *  - TlvDepthBug: an 'I' record holding 0x0BADF00D inside a container inside a container
 *    -> abort() (SIGABRT).
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned tlv_deep_ints;

static int walk(const unsigned char *p, long n, int depth) {
  int records = 0;
  while (n >= 2) {
    unsigned char type = p[0];
    long len = p[1];
    if (len > n - 2) return -1;
    const unsigned char *v = p + 2;
    if (type == 'C') {
      if (depth >= 3) return -2;
      if (walk(v, len, depth + 1) < 0) return -3;
    } else if (type == 'I') {
      if (len != 4) return -4;
      uint32_t x = (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 | (uint32_t)v[2] << 8 | v[3];
      if (depth == 2) {
        tlv_deep_ints++; /* a volatile store keeps this a branch of its own */
        if (x == 0x0BADF00Du) abort(); /* TlvDepthBug */
      }
    } else if (type != 'P') {
      return -5;
    }
    p += 2 + len;
    n -= 2 + len;
    records++;
  }
  return records;
}

int main(void) {
  unsigned char buf[256];
  long n = read(0, buf, sizeof buf);
  if (n < 0) return 1;
  return walk(buf, n, 0) < 0 ? 2 : 0;
}
