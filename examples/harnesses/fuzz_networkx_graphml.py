"""networkx: read a GraphML document (raw bytes). Follows OSS-Fuzz's networkx project (fuzz_graphml)."""
import io
import sys
import xml.etree.ElementTree

import atheris

with atheris.instrument_imports():
    import networkx
    import networkx.readwrite.graphml  # networkx imports its readers lazily: instrument this one


def TestOneInput(data):
    try:
        networkx.read_graphml(io.BytesIO(data))
    except (xml.etree.ElementTree.ParseError, networkx.NetworkXError, LookupError, ValueError):
        return


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
