"""urllib.parse (stdlib): split, join and unquote a URL (FuzzedDataProvider); instrument_all(), as
OSS-Fuzz harnesses of modules Atheris imports itself do."""
import sys
import urllib.parse

import atheris

atheris.instrument_all()


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    base = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 64))
    url = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        parts = urllib.parse.urlsplit(url)
        str(parts.port)
        urllib.parse.urlunsplit(parts)
        urllib.parse.urljoin(base, url)
        urllib.parse.parse_qs(parts.query, strict_parsing=False)
        urllib.parse.unquote(url, errors="strict")
    except (ValueError, UnicodeError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
