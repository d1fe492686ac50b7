"""ipaddress (stdlib): parse a network and walk its subnets and supernet (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():  # Atheris has imported ipaddress already: this instruments nothing
    import ipaddress


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    strict, diff = fdp.ConsumeBool(), fdp.ConsumeIntInRange(0, 3)
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        network = ipaddress.ip_network(text, strict=strict)
        list(network.subnets(prefixlen_diff=diff))
        network.supernet()
        str(ipaddress.ip_interface(text).with_hostmask)
    except ValueError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
