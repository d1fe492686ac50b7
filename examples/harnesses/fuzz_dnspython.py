"""dnspython: a DNS name from text or wire format, or a message from wire format (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import dns.exception
    import dns.message
    import dns.name


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    kind = fdp.ConsumeIntInRange(0, 2)
    try:
        if kind == 0:
            name = dns.name.from_text(fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()))
            name.to_wire()
        elif kind == 1:
            dns.name.from_wire(fdp.ConsumeBytes(fdp.remaining_bytes()), 0)
        else:
            dns.message.from_wire(fdp.ConsumeBytes(fdp.remaining_bytes())).to_text()
    except (dns.exception.DNSException, UnicodeError, ValueError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
