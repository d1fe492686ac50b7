"""The planted inputs of tests/fuzzproc_targets.py, which holds only their checksums."""

ENGINE_FIND = b"ENGINE-FIND-7f3a9c"  # an input libFuzzer will not make up in a few seconds
CRASHER = b"\xde\xad\xbe\xef"  # a native abort after b"1" or b"2"
PY_CRASHER = b"PY-CRASH-41c2"  # a Python exception
