/* A small record parser with two planted bugs (symfence native example).
 *
 * Input on stdin: "SFRC" magic, u32 little-endian kind, u8 length, u8 checksum, payload.
 *  - RecordChecksumBug: kind 0xC0FFEE42 and a payload whose byte sum (mod 256) equals the
 *    checksum byte and whose first byte is '!' -> write through a NULL pointer (SIGSEGV).
 *  - RecordLoopBug: kind 0x1005EED5 and payload "LOOP" -> the loop never ends (a hang).
 * Random mutation must guess 32 bits of magic and 32 bits of kind before either bug.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int *volatile record_sink = 0; /* a NULL pointer the optimiser cannot see through */
volatile unsigned long record_spin;

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int parse(const unsigned char *buf, long n) {
  if (n < 10) return 1;
  if (memcmp(buf, "SFRC", 4) != 0) return 2;
  uint32_t kind = le32(buf + 4);
  unsigned len = buf[8];
  unsigned char sum = buf[9];
  const unsigned char *payload = buf + 10;
  if (len > n - 10) return 3;
  unsigned char acc = 0;
  for (unsigned i = 0; i < len; i++) acc = (unsigned char)(acc + payload[i]);
  if (kind == 0xC0FFEE42u) {
    if (len >= 2 && acc == sum && payload[0] == '!') {
      *record_sink = 0x42; /* RecordChecksumBug */
    }
    return 4;
  }
  if (kind == 0x1005EED5u) {
    if (len >= 4 && memcmp(payload, "LOOP", 4) == 0) {
      for (;;) record_spin++; /* RecordLoopBug */
    }
    return 5;
  }
  return 0;
}

int main(void) {
  unsigned char buf[256];
  long n = read(0, buf, sizeof buf);
  if (n < 0) return 1;
  return parse(buf, n);
}
