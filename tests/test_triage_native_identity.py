"""Native crash identity on what real C/C++ builds give: a stripped binary (no symbols), C++
template and member functions (names with spaces), ASan reports with inlined frames. Each is
built here (cc/g++/clang++), crashed for real, and symbolised as a confirmation does
(worker/triage/symbolize.py: the sanitizer report, else gdb)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from symfence.protocol.crashid import identity_from_detail
from symfence.worker.triage.symbolize import native_detail
from tests.native_support import compile_c, needs_cc
from tests.test_triage import THREE_BUGS_C

pytestmark = [needs_cc, pytest.mark.skipif(shutil.which("gdb") is None, reason="no gdb")]

CPP = r"""
#include <unistd.h>
#include <cstdlib>
namespace ns {
template <typename T, typename U> struct Parser {
  int *volatile sink = nullptr;
  __attribute__((noinline)) void parse(int x) { if (x == 'P') sink[1] = 1; }
  __attribute__((noinline)) void read(int x) { if (x == 'R') sink[2] = 2; }
};
}
static inline __attribute__((always_inline)) int inl_a(const unsigned char *b, int *p) { return p[b[1]]; }
static inline __attribute__((always_inline)) int inl_b(const unsigned char *b, int *p) {
  p[b[2] + 4] = b[0]; return 1; }
__attribute__((noinline)) int outer(const unsigned char *b) {
  int *p = (int *)malloc(4 * sizeof(int)); int v = 0;
  if (b[0] == 'X') v = inl_a(b, p);
  if (b[0] == 'Y') v = inl_b(b, p);
  free(p); return v; }
int main() {
  unsigned char buf[64] = {0}; long n = read(0, buf, sizeof buf);
  ns::Parser<int, char> p;
  if (n > 0) { p.parse(buf[0]); p.read(buf[0]); return outer(buf); }
  return 0; }
"""


def key(binary, data: bytes) -> str:
    return identity_from_detail(native_detail(str(binary), data)).key


def test_a_stripped_binary_names_its_frames_by_offset(tmp_path):
    binary = compile_c(tmp_path, "three", THREE_BUGS_C)
    subprocess.run(["strip", str(binary)], check=True)
    first, again = key(binary, b"A" + bytes(10)), key(binary, b"A" + bytes(30))
    second = key(binary, b"B" + bytes(10))
    assert first == again  # one bug, two inputs
    assert first != second  # two bugs (the old rules: no frame, both 'SIGSEGV' without an edge path)
    assert first.startswith("SIGSEGV @ three+0x") and " > three+0x" in first, first
    assert first.count(" > ") == 1  # the faulting function and main; not _start (process start-up)


@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("clang++") is None, reason="no g++/clang++")
def test_cpp_templates_and_inlined_frames_keep_their_bugs_apart(tmp_path):
    plain = compile_c(tmp_path, "tpl", CPP, "-g", "-xc++", cc="g++")
    asan = compile_c(tmp_path, "tpl_asan", CPP, "-g", "-O2", "-xc++", "-fsanitize=address", cc="clang++")
    gdb_parse, gdb_read = key(plain, b"P"), key(plain, b"R")
    assert gdb_parse.startswith("SIGSEGV @ ns::Parser<int,char>::parse+0x"), gdb_parse
    assert gdb_read.startswith("SIGSEGV @ ns::Parser<int,char>::read+0x"), gdb_read
    # ASan names the same functions as gdb (no parameter list, no spaces): before, both were 'ns::Parser<int,'
    assert key(asan, b"P") == "SEGV WRITE @ ns::Parser<int,char>::parse > main"
    assert key(asan, b"R") == "SEGV WRITE @ ns::Parser<int,char>::read > main"
    # two bugs inlined into one function: ASan lists each inlined frame on a line of its own
    assert key(asan, b"X\x09\x00") == "heap-buffer-overflow READ 4 @ inl_a > outer > main"
    assert key(asan, b"Y\x00\x09") == "heap-buffer-overflow WRITE 4 @ inl_b > outer > main"


LOOPS_C = r"""
#include <unistd.h>
volatile int g;
__attribute__((noinline)) int step(int x) { return x + 1; }
__attribute__((noinline)) void spin(void) { int i = 0; for (;;) { i = step(i); g = i; } }
__attribute__((noinline)) void stall(void) { for (;;) { g++; } }
int main(void) {
  unsigned char buf[16] = {0}; long n = read(0, buf, sizeof buf);
  if (n > 0 && (buf[0] == 's' || buf[0] == 'S')) spin();
  if (n > 0 && buf[0] == 't') stall();
  return 0; }
"""


def test_native_hangs_one_loop_one_two_loops_two(tmp_path):
    from symfence.worker.native.base import NativeOptions
    from symfence.worker.native.runner import with_hang_stack

    binary = str(compile_c(tmp_path, "loops", LOOPS_C, "-g"))
    opts = NativeOptions(exec_timeout_s=0.3)
    details = [with_hang_stack(binary, d, opts, "hang: over 0.3 s") for d in (b"s", b"Sxx", b"t")]
    keys = [identity_from_detail(d, binary, kind="hang").key for d in details]
    assert keys == ["timeout @ spin > main", "timeout @ spin > main", "timeout @ stall > main"], keys
    # an input that does not hang gets no stack (the detail stays as it was)
    assert with_hang_stack(binary, b"x", opts, "hang: over 0.3 s") == "hang: over 0.3 s"
