"""networkx: decode a graph6 / sparse6 graph (raw bytes).
Follows OSS-Fuzz's networkx project (fuzz_graph6, fuzz_sparse6)."""
import sys

import atheris

with atheris.instrument_imports():
    import networkx
    import networkx.readwrite.graph6  # networkx imports its readers lazily: instrument these
    import networkx.readwrite.sparse6


def TestOneInput(data):
    if len(data) < 5:  # as OSS-Fuzz's: shorter ones end in an IndexError inside networkx at once
        return
    decode = networkx.from_sparse6_bytes if data[:1] == b":" else networkx.from_graph6_bytes
    try:
        decode(data)
    except (networkx.NetworkXError, ValueError):
        return


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
